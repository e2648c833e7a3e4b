"""The tuned SGLang config as a Ray Serve LLM app, through Ray's ``SGLangServer`` (Ray >= 2.60).

    serve run promoted.yaml        # import_path: serve_apps.sglang:build_app

SGLang's in-process engine takes ServerArgs field names, which are the snake_case forms of the
flags a trial launched with (``--mem-fraction-static`` -> ``mem_fraction_static``). When Ray Serve LLM
cannot load the installed SGLang (or ``server: process``), each replica runs SGLang's own server
(serve_apps.engine_process).
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
        **shared_gpu_placement(parsed),
        server_cls=SERVER_CLS,
    )


def build_app(args: dict[str, Any]) -> Application:
    """Serve builder (import path ``serve_apps.sglang:build_app``): OpenAI-compatible SGLang app, through Ray
    Serve LLM or (``server: process``, or ``auto`` when Ray Serve LLM cannot load the installed engine) the
    engine's own server in each replica."""
    parsed = parse_args(args)
    fields = llm_config(parsed)  # validate our args before the heavy import
    return build_llm_app(parsed, fields, EXTRA)
