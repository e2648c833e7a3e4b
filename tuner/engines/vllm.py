"""vLLM: `python -m vllm.entrypoints.openai.api_server --model ... <trial flags>`.

Nothing here imports vllm: the argument check runs in the engine's own interpreter
(tuner.engines.args). The server runs with VLLM_SERVER_DEV_MODE=1 so /server_info returns the
resolved config (what vLLM really chose: max_num_batched_tokens, chunked prefill, block size...),
which servetune logs next to what the trial asked for.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tuner.engines import failures
from tuner.engines.base import LaunchSpec
from tuner.engines.server_engine import ServerEngine
from tuner.spec.study import ModelSpec
from tuner.trial.outcome import TrialOutcome

VLLM_PATTERNS: tuple[failures.Pattern, ...] = (
    failures.pattern(r"No common block size for", TrialOutcome.START_FAILED, "block size not supported"),
    failures.pattern(r"max_num_batched_tokens \(\d+\) must be greater than or equal to max_num_seqs",
                     TrialOutcome.START_FAILED, "invalid config"),
    failures.pattern(r"smaller than max_model_len|exceeds max_num_seqs", TrialOutcome.START_FAILED, "invalid config",
                     unless=r"WARNING"),
    *failures.COMMON,
)


class VLLMEngine(ServerEngine):
    name = "vllm"
    metrics_prefix = "vllm:"
    module = "vllm.entrypoints.openai.api_server"
    check_key = "vllm"
    reserved = frozenset({"model", "model_tag", "host", "port", "served_model_name", "tokenizer",
                          "trust_remote_code", "uds"})
    patterns = VLLM_PATTERNS
    # After these, vLLM's API server can take minutes to exit (seen on 0.32 CPU): stop it sooner.
    fatal_start = re.compile(r"Engine core initialization failed|EngineCore failed to start")
    # vLLM's engine arguments are BooleanOptionalAction (`--no-enable-prefix-caching`); these few
    # front-end switches are not (seen in vLLM 0.32's parser). The parser, when importable, decides.
    negatable_by_default = True
    switches = frozenset({"headless", "grpc", "data_parallel_multi_port_external_lb", "disable_log_stats",
                          "aggregate_engine_logging"})

    # CUDA graphs are captured after the KV cache is sized: a larger capture size can run out of memory at a
    # memory share that runs with the default (as SGLang's cuda_graph_max_bs)
    memory_knobs = ("gpu_memory_utilization", "max_num_seqs", "max_num_batched_tokens", "max_cudagraph_capture_size")
    metric_names = {
        "running": ("num_requests_running",),
        "waiting": ("num_requests_waiting",),
        "kv_cache_usage": ("kv_cache_usage_perc", "gpu_cache_usage_perc"),
        "preemptions": ("num_preemptions_total", "num_preemptions"),
    }
    serve_builder = "serve_apps.vllm:build_app"

    def identity_flags(self, model: ModelSpec, launch: LaunchSpec | None) -> list[str]:
        out = ["--model", model.name, "--served-model-name", model.client_name]
        if launch is not None:
            out += ["--host", launch.host, "--port", str(launch.port)]
        return out

    def serve_kwargs(self, model: ModelSpec, args: Mapping[str, Any]) -> dict[str, Any]:
        kwargs = super().serve_kwargs(model, args)
        kwargs.pop("tokenizer", None)  # Ray Serve LLM takes it as model_loading_config.tokenizer_source
        return kwargs

    def env(self, launch: LaunchSpec) -> dict[str, str]:
        base = {"VLLM_SERVER_DEV_MODE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
        return {**base, **super().env(launch)}

    def resolved_config(self, base_url: str) -> dict[str, Any]:
        """GET /server_info?config_format=json: {"vllm_config": {...}, "vllm_env": {...}}; {} if unavailable."""
        info = self.get_json(base_url + "/server_info?config_format=json", timeout_s=60)
        if not info:
            return {}
        info.pop("system_env", None)  # pip lists and driver info: large, not config
        return info
