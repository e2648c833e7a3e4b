"""What the vLLM and SGLang apps share: the LLMConfig pieces that come from a promoted config."""

from __future__ import annotations

from typing import Any

from serve_apps.args import AppArgs

# Flags of the engines' HTTP front ends, not of the engine: Ray Serve LLM owns host, port and names.
FRONTEND_ONLY = frozenset({
    "host", "port", "served_model_name", "api_key", "uvicorn_log_level", "ssl_keyfile", "ssl_certfile",
    "root_path", "allowed_origins", "disable_uvicorn_access_log", "log_level",
})


def tuned_kwargs(args: AppArgs) -> dict[str, Any]:
    """The trial's engine arguments without front-end flags (those would clash with Serve's)."""
    return {k: v for k, v in args.engine_args.items() if k not in FRONTEND_ONLY}


def model_loading(args: AppArgs) -> dict[str, Any]:
    loading: dict[str, Any] = {"model_id": args.model.client_name, "model_source": args.model.name}
    if args.model.tokenizer:
        loading["tokenizer_source"] = args.model.tokenizer
    return loading


def deployment_config(args: AppArgs) -> dict[str, Any]:
    """Replicas, autoscaling and max_ongoing_requests derived from the measured capacity."""
    return args.deployment.serve_options()
