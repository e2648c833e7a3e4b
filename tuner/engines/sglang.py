"""SGLang: `python -m sglang.launch_server --model-path ... --enable-metrics <trial flags>`.

Nothing here imports sglang: the argument check runs in the engine's own interpreter against
`ServerArgs.add_cli_args` (tuner.engines.args). SGLang's switches are store_true (`--disable-...`,
`--enable-...`), so a False trial value leaves the flag out unless the parser says `--no-` exists.
Metrics need `--enable-metrics` (added always); the resolved config comes from /get_server_info.
vLLM-style names a study may share (max_model_len, tensor_parallel_size) are renamed to SGLang's
(context_length, tp_size) by `renames`, for the launch and the Serve app alike.
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

SGLANG_PATTERNS: tuple[failures.Pattern, ...] = (
    failures.pattern(r"Not enough memory\. Please try to increase --mem-fraction-static", TrialOutcome.OOM,
                     "not enough memory for the KV cache"),
    failures.pattern(r"max_total_num_tokens.*(too small|<=? ?0)|KV cache pool.*too small", TrialOutcome.OOM,
                     "KV cache too small"),
    failures.pattern(r"context_length.*(exceeds|larger than)|is not supported|Unsupported", TrialOutcome.START_FAILED,
                     "invalid config", unless=r"WARNING"),
    *failures.COMMON,
)


class SGLangEngine(ServerEngine):
    name = "sglang"
    metrics_prefix = "sglang:"
    module = "sglang.launch_server"
    check_key = "sglang"
    reserved = frozenset({"model_path", "model", "host", "port", "served_model_name", "tokenizer_path",
                          "trust_remote_code", "enable_metrics"})
    patterns = SGLANG_PATTERNS
    fatal_start = re.compile(r"Received sigquit from a child process|Scheduler hit an exception")
    negatable_by_default = False
    renames = {"max_model_len": "context_length", "tensor_parallel_size": "tp_size"}
    tokenizer_arg = "tokenizer_path"
    always = ("--enable-metrics",)
    memory_knobs = ("mem_fraction_static", "max_running_requests", "chunked_prefill_size", "max_prefill_tokens",
                    "cuda_graph_max_bs")
    metric_names = {
        "running": ("num_running_reqs",),
        "waiting": ("num_queue_reqs",),
        "kv_cache_usage": ("token_usage",),
        "preemptions": ("num_retracted_reqs", "num_retractions_total"),
    }
    serve_builder = "serve_apps.sglang:build_app"

    def identity_flags(self, model: ModelSpec, launch: LaunchSpec | None) -> list[str]:
        out = ["--model-path", model.name, "--served-model-name", model.client_name]
        if launch is not None:
            out += ["--host", launch.host, "--port", str(launch.port)]
        return out

    def serve_kwargs(self, model: ModelSpec, args: Mapping[str, Any]) -> dict[str, Any]:
        """SGLang's in-process engine (Ray's SGLangServer) takes ServerArgs field names: the same mapping."""
        return {"model_path": model.name, **super().serve_kwargs(model, args)}

    def resolved_config(self, base_url: str) -> dict[str, Any]:
        """GET /get_server_info (newer SGLang: /server_info): server args as resolved; {} if unavailable."""
        for path in ("/get_server_info", "/server_info"):
            info = self.get_json(base_url + path, timeout_s=30)
            if info:
                return info
        return {}
