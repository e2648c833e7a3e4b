"""The tuned SGLang config as a Ray Serve LLM app, through Ray's ``SGLangServer`` (Ray >= 2.60).

    serve run promoted.yaml        # import_path: serve_apps.sglang:build_app

SGLang's in-process engine takes ServerArgs field names, which are the snake_case forms of the
flags a trial launched with (``--mem-fraction-static`` -> ``mem_fraction_static``).
"""

from __future__ import annotations

from typing import Any

from ray.serve.deployment import Application

from serve_apps.args import AppArgs, parse_args
from serve_apps.llm_common import deployment_config, engine_kwargs, model_loading

ENGINE = "sglang"
EXTRA = " 'sglang[all,ray]'"

SERVER_CLS = "ray.llm._internal.serve.engines.sglang:SGLangServer"


def llm_config(args: dict[str, Any] | AppArgs) -> dict[str, Any]:
    """The LLMConfig fields (a plain dict: validating it needs no engine installed)."""
    parsed = parse_args(args)
    if parsed.engine != "sglang":
        raise ValueError(f"serve_apps.sglang builds engine 'sglang' apps, got {parsed.engine!r}")
    return dict(
        model_loading_config=model_loading(parsed),
        engine_kwargs=engine_kwargs(parsed),
        accelerator_type=parsed.accelerator_type,
        deployment_config=deployment_config(parsed),
        server_cls=SERVER_CLS,
    )


def build_app(args: dict[str, Any]) -> Application:
    """Serve builder (import path ``serve_apps.sglang:build_app``): OpenAI-compatible SGLang app."""
    fields = llm_config(args)  # validate our args before the heavy import
    try:
        from ray.serve.llm import LLMConfig, build_openai_app
    except ImportError as exc:
        raise ImportError(f"the {ENGINE} Serve app needs Ray Serve LLM with {ENGINE} installed where it is "
                          f"built (pip install 'ray[llm]'{EXTRA}): {exc}") from exc
    return build_openai_app({"llm_configs": [LLMConfig(**fields)]})
