"""What the vLLM and SGLang apps share: the LLMConfig pieces that come from a promoted config, and the
choice between Ray Serve LLM and the engine's own server in the replica (serve_apps.engine_process)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ray.serve.deployment import Application

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


def shared_gpu_placement(args: AppArgs) -> dict[str, Any]:
    """LLMConfig fields for an app that shares its GPU (`gpu_fraction`): fractional GPU bundles, which
    Ray Serve LLM reads per engine (vLLM: one bundle per worker; Ray's SGLangServer: one bundle for the
    replica, under its own keys, so the GPU kind is named too); {} for whole GPUs."""
    f = args.gpu_fraction
    if f is None:
        return {}
    if args.engine == "sglang":
        from tuner.spec.levers import gpus

        bundle = {"CPU": args.deployment.num_cpus, "GPU": f * gpus(args.engine_args, args.model.tensor_parallel_size)}
        return {"placement_group_config": {"placement_group_bundles": [bundle],
                                           "placement_group_strategy": "STRICT_PACK"},
                "accelerator_config": {"kind": "gpu"}}
    return {"placement_group_config": {"bundle_per_worker": {"GPU": f}}}


def ray_llm_builder() -> tuple[Callable[..., Any], Any] | str:
    """(build_openai_app, LLMConfig) when Ray Serve LLM loads with the installed engine, else why not.

    Ray Serve LLM imports engine internals of the one engine version it is written for (Ray 2.60:
    `vllm.entrypoints.serve.engine.protocol`, vLLM 0.29), so an import is the honest probe."""
    try:
        from ray.serve.llm import LLMConfig, build_openai_app
    except ImportError as exc:
        return f"{type(exc).__name__}: {exc}"
    return build_openai_app, LLMConfig


def build_llm_app(args: AppArgs, fields: dict[str, Any], extra: str) -> Application:
    """Ray Serve LLM's app for `fields` (server: ray_llm, or auto when it loads), else the process app."""
    from serve_apps.engine_process import build

    if args.server == "process":
        return build(args)
    found = ray_llm_builder()
    if isinstance(found, str):
        if args.server == "ray_llm":
            raise ImportError(f"the {args.engine} Serve app asks for Ray Serve LLM (server: ray_llm), which cannot "
                              f"load here ({found}); install 'ray[llm]'{extra} with the engine version it pins, "
                              f"or set server: process (or auto) in promoted.yaml's args")
        print(f"servetune: Ray Serve LLM cannot load {args.engine} here ({found[:300]}); serving it through the "
              f"engine's own server in the replica (serve_apps.engine_process)")
        return build(args)
    build_openai_app, llm_config_cls = found
    return build_openai_app({"llm_configs": [llm_config_cls(**fields)]})
