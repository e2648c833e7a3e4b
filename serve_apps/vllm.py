"""The tuned vLLM config as a Ray Serve LLM app (``LLMConfig`` served by ``build_openai_app``).

    serve run promoted.yaml        # import_path: serve_apps.vllm:build_app

vllm itself is imported only inside the replicas Ray Serve LLM starts, not here.
"""

from __future__ import annotations

from typing import Any

from ray.serve.deployment import Application

from serve_apps.args import AppArgs, parse_args
from serve_apps.llm_common import deployment_config, engine_kwargs, model_loading

ENGINE = "vllm"
EXTRA = ""


def llm_config(args: dict[str, Any] | AppArgs) -> dict[str, Any]:
    """The LLMConfig fields (a plain dict: validating it needs no engine installed)."""
    parsed = parse_args(args)
    if parsed.engine != "vllm":
        raise ValueError(f"serve_apps.vllm builds engine 'vllm' apps, got {parsed.engine!r}")
    return dict(
        model_loading_config=model_loading(parsed),
        engine_kwargs=engine_kwargs(parsed),
        accelerator_type=parsed.accelerator_type,
        deployment_config=deployment_config(parsed),
    )


def build_app(args: dict[str, Any]) -> Application:
    """Serve builder (import path ``serve_apps.vllm:build_app``): OpenAI-compatible vLLM app."""
    fields = llm_config(args)  # validate our args before the heavy import
    try:
        from ray.serve.llm import LLMConfig, build_openai_app
    except ImportError as exc:
        raise ImportError(f"the {ENGINE} Serve app needs Ray Serve LLM with {ENGINE} installed where it is "
                          f"built (pip install 'ray[llm]'{EXTRA}): {exc}") from exc
    return build_openai_app({"llm_configs": [LLMConfig(**fields)]})
