"""What the vLLM and SGLang apps share: the LLMConfig pieces that come from a promoted config."""

from __future__ import annotations

from typing import Any

from serve_apps.args import AppArgs
from tuner.engines import get_engine


def engine_kwargs(args: AppArgs) -> dict[str, Any]:
    """The engine kwargs from the engine's home: the same mapping its trial launched with."""
    return get_engine(args.engine).serve_kwargs(args.model, args.engine_args)


def model_loading(args: AppArgs) -> dict[str, Any]:
    loading: dict[str, Any] = {"model_id": args.model.client_name, "model_source": args.model.name}
    if args.model.tokenizer:
        loading["tokenizer_source"] = args.model.tokenizer
    return loading


def deployment_config(args: AppArgs) -> dict[str, Any]:
    """Replicas, autoscaling and max_ongoing_requests derived from the measured capacity."""
    return args.deployment.serve_options()
