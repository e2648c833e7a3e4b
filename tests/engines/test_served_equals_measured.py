"""What Ray Serve serves is what a trial measured: one argument mapping per engine, for both.

A promoted config goes to Serve as the engine kwargs of its Ray Serve LLM app; a trial launched the
same config as a command line. Both come from the engine's home (`engine_args`), so here the served
kwargs, written as flags, must equal the measured argv minus the identity flags servetune owns.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from serve_apps import sglang as sglang_app
from serve_apps import vllm as vllm_app
from serve_apps.args import AppArgs, Autoscaling, DeploymentArgs
from tuner.engines import get_engine
from tuner.engines.base import LaunchSpec
from tuner.engines.server_engine import ServerEngine
from tuner.spec.study import EngineSettings, ModelSpec

IDENTITY = {"model", "model_path", "served_model_name", "host", "port", "enable_metrics"}
MODEL = ModelSpec(name="/models/Qwen3-8B", served_name="qwen3-8b", max_model_len=8192, tokenizer="/tok",
                  load_format="dummy")
CASES = {
    "vllm": (vllm_app, {"max_num_seqs": 128, "max_num_batched_tokens": 8192, "enable_chunked_prefill": False,
                        "max_model_len": 4096, "speculative_config": {"method": "ngram", "num_speculative_tokens": 4}}),
    "sglang": (sglang_app, {"max_running_requests": 128, "mem_fraction_static": 0.85, "disable_radix_cache": True,
                            "max_model_len": 4096, "tensor_parallel_size": 1, "schedule_policy": "lpm"}),
}


def flags_to_args(argv: list[str]) -> dict[str, Any]:
    """--a-b 1 --c --no-d -> {a_b: "1", c: True, d: False}"""
    out: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        tok = argv[i]
        assert tok.startswith("--"), argv[i:]
        nxt = argv[i + 1] if i + 1 < len(argv) else "--"
        name = tok[2:].replace("-", "_")
        if nxt.startswith("--"):
            out[name.removeprefix("no_")] = not name.startswith("no_")
            i += 1
        else:
            out[name] = nxt
            i += 2
    return out


def as_flag_values(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: v if isinstance(v, bool) else json.dumps(v) if isinstance(v, (dict, list)) else str(v)
            for k, v in kwargs.items()}


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_served_kwargs_equal_the_measured_argv(engine: str) -> None:
    app, tuned = CASES[engine]
    eng = get_engine(engine)
    assert isinstance(eng, ServerEngine)
    launch = LaunchSpec(model=MODEL, host="127.0.0.1", port=8123, log_path=Path("/tmp/x.log"),
                        settings=EngineSettings())
    argv = eng.argv(tuned, launch)
    measured = flags_to_args(argv[3:])  # after `<python> -m <module>`
    args = AppArgs(engine=engine, model=MODEL, engine_args=tuned, deployment=DeploymentArgs(
        max_ongoing_requests=4, autoscaling_config=Autoscaling(min_replicas=1, max_replicas=2,
                                                               target_ongoing_requests=2)))
    fields = app.llm_config(args)
    served = as_flag_values(fields["engine_kwargs"])
    assert served.pop("model_path", MODEL.name) == MODEL.name
    if eng.tokenizer_arg not in served:  # vLLM's tokenizer travels as model_loading_config.tokenizer_source
        served[eng.tokenizer_arg] = fields["model_loading_config"]["tokenizer_source"]
    assert {k: v for k, v in measured.items() if k not in IDENTITY} == served


def test_sglang_serves_the_context_length_it_measured() -> None:
    """The bug this mapping fixed: the SGLang app kept `max_model_len` (a stray argument) and served the
    study's context length instead of the trial's."""
    args = AppArgs(engine="sglang", model=MODEL, engine_args={"max_model_len": 2048}, deployment=DeploymentArgs(
        max_ongoing_requests=4, autoscaling_config=Autoscaling(min_replicas=1, max_replicas=2,
                                                               target_ongoing_requests=2)))
    kwargs = sglang_app.llm_config(args)["engine_kwargs"]
    assert kwargs["context_length"] == 2048 and "max_model_len" not in kwargs
