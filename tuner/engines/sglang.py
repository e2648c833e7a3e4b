"""SGLang: `python -m sglang.launch_server --model-path ... --enable-metrics <trial flags>`.

Nothing here imports sglang: the argument check runs in the engine's own interpreter against
`ServerArgs.add_cli_args` (tuner.engines.args). SGLang's switches are store_true (`--disable-...`,
`--enable-...`), so a False trial value leaves the flag out unless the parser says `--no-` exists.
Metrics need `--enable-metrics` (added always); the resolved config comes from /get_server_info.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tuner.engines import failures
from tuner.engines.base import LaunchSpec
from tuner.engines.server_engine import ServerEngine, spec_value
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

    def model_flags(self, model: ModelSpec, launch: LaunchSpec | None, args: Mapping[str, Any]) -> list[str]:
        out = ["--model-path", model.name, "--served-model-name", model.client_name]
        if launch is not None:
            out += ["--host", launch.host, "--port", str(launch.port)]
        for names, value, opt in (
            (("context_length", "max_model_len"), model.max_model_len, "--context-length"),
            (("dtype",), model.dtype, "--dtype"),
            (("tp_size", "tensor_parallel_size"), model.tensor_parallel_size, "--tp-size"),
            (("load_format",), model.load_format, "--load-format"),
        ):
            value, from_trial = spec_value(args, names, value)
            if value is not None and not from_trial:
                out += [opt, str(value)]
        if model.tokenizer:
            out += ["--tokenizer-path", model.tokenizer]
        if model.trust_remote_code:
            out.append("--trust-remote-code")
        out.append("--enable-metrics")
        return out

    def trial_flags(self, args: Mapping[str, Any]) -> list[str]:
        # vLLM-style names a study may share across engines map to SGLang's own.
        renamed = {("context_length" if k == "max_model_len" else "tp_size" if k == "tensor_parallel_size" else k): v
                   for k, v in args.items()}
        return super().trial_flags(renamed)

    def check_args(self, args: Mapping[str, Any], launch: LaunchSpec | None = None) -> None:
        renamed = {("context_length" if k == "max_model_len" else "tp_size" if k == "tensor_parallel_size" else k): v
                   for k, v in args.items()}
        super().check_args(renamed, launch)

    def resolved_config(self, base_url: str) -> dict[str, Any]:
        """GET /get_server_info (newer SGLang: /server_info): server args as resolved; {} if unavailable."""
        for path in ("/get_server_info", "/server_info"):
            info = self.get_json(base_url + path, timeout_s=30)
            if info:
                return info
        return {}
