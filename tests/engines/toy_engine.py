"""A third engine built from this one module plus toy_space.yaml, for tests/engines/test_third_engine.py.

"toy" is a made-up engine with its own knob names (toy_batch, toy_memory, toy_chunk). It runs as the
simulator's HTTP server imitating vLLM, so a whole study can run here; everything servetune knows about
it is below, and nothing in tuner/ names it. Registered with SERVETUNE_ENGINES=toy=tests.engines.toy_engine:ToyEngine.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tuner.engines import failures
from tuner.engines.args import cli_flags
from tuner.engines.base import Engine, LaunchSpec
from tuner.engines.process import http_get
from tuner.engines.vllm import VLLMEngine
from tuner.spec.study import ModelSpec
from tuner.trial.outcome import TrialOutcome

ROOT = Path(__file__).resolve().parents[2]
# toy's knob -> the simulated server's (vLLM-flavoured) flag it drives
KNOBS = {"toy_batch": "max_num_seqs", "toy_memory": "gpu_memory_utilization", "toy_chunk": "max_num_batched_tokens"}


class ToyEngine(Engine):
    name = "toy"
    metrics_prefix = "vllm:"
    metric_names = VLLMEngine.metric_names  # the server below speaks vLLM's /metrics
    patterns = (failures.pattern(r"toy refused", TrialOutcome.START_FAILED, "toy refused"), *VLLMEngine.patterns)
    memory_knobs = ("toy_memory", "toy_batch")
    uses_gpu = False
    space_file = Path(__file__).with_name("toy_space.yaml")

    def engine_args(self, model: ModelSpec, args: Mapping[str, Any]) -> dict[str, Any]:
        return {KNOBS.get(k, k): v for k, v in args.items()}

    def argv(self, args: Mapping[str, Any], launch: LaunchSpec) -> list[str]:
        m = launch.model
        return [sys.executable, "-m", "tuner.sim.server", "--model", m.name, "--served-model-name", m.client_name,
                "--host", launch.host, "--port", str(launch.port), "--flavour", "vllm", "--gpu", "H200",
                "--shape", m.shape or "qwen3-8b", "--max-model-len", str(m.max_model_len), "--time-scale", "5.0",
                *cli_flags(self.engine_args(m, args), lambda _name: True)]

    def resolved_config(self, base_url: str) -> dict[str, Any]:
        """What the server runs with (the simulated server reports its resolved arguments)."""
        status, body = http_get(base_url + "/server_info", timeout_s=30)
        return json.loads(body) if status == 200 else {}

    def env(self, launch: LaunchSpec) -> dict[str, str]:
        path = os.environ.get("PYTHONPATH", "")
        return {"PYTHONPATH": str(ROOT) + (os.pathsep + path if path else "")}
