"""The tuned vLLM config as a Ray Serve LLM app (``LLMConfig`` served by ``build_openai_app``).

    serve run promoted.yaml        # import_path: serve_apps.vllm:build_app

vllm itself is imported only inside the replicas Ray Serve LLM starts, not here. When Ray Serve LLM
cannot load the installed vLLM (or ``server: process``), each replica runs vLLM's own OpenAI server
instead (serve_apps.engine_process).
"""

from __future__ import annotations

from typing import Any

from ray.serve.deployment import Application

from serve_apps.args import AppArgs, parse_args
from serve_apps.llm_common import (
    build_llm_app,
    deployment_config,
    engine_kwargs,
    model_loading,
    shared_gpu_placement,
)

ENGINE = "vllm"
EXTRA = ""  # pip extra named in the error when Ray Serve LLM is asked for and missing


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
        **shared_gpu_placement(parsed),
    )


def build_app(args: dict[str, Any]) -> Application:
    """Serve builder (import path ``serve_apps.vllm:build_app``): OpenAI-compatible vLLM app, through Ray
    Serve LLM or (``server: process``, or ``auto`` when Ray Serve LLM cannot load the installed engine) the
    engine's own server in each replica."""
    parsed = parse_args(args)
    fields = llm_config(parsed)  # validate our args before the heavy import
    return build_llm_app(parsed, fields, EXTRA)
