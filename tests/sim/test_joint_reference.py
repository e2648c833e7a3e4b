"""The joint vLLM/SGLang H200 study (h200-joint-dynamic, `engine: [vllm, sglang]`) as held-out reference points:
each point simulated on its own trial's engine, not on a flavour guessed from the study's engine field (a list)."""

from __future__ import annotations

import dataclasses
from collections import Counter

from tuner.sim.reference import (
    JOINT_STUDY,
    STUDY_SETS,
    simulate_study_point,
    study_engine,
    study_group,
    study_points,
)

SGLANG_ALONE = "benchmarks/results/h200/h200-sglang-dynamic"  # SGLang defaults alone, same workload, seed, 6 req/s


def test_the_joint_study_is_a_held_out_set_with_both_engines() -> None:
    assert JOINT_STUDY in STUDY_SETS
    pts = study_points(*JOINT_STUDY)
    # vLLM defaults and FP8 at 3 loads each, SGLang defaults at 3, SGLang FP8 at the 2 it ran before its rung stop
    assert Counter((sp.engine, study_group(sp)) for sp in pts) == {
        ("vllm", "bf16-dynamic"): 3, ("vllm", "fp8"): 3, ("sglang", "sglang"): 3, ("sglang", "sglang-fp8"): 2}
    # the study's fixed SGLang attention backend is on SGLang's trials only
    assert all((dict(sp.args).get("attention_backend") == "triton") == (sp.engine == "sglang") for sp in pts)


def test_a_joint_sglang_point_is_simulated_with_the_sglang_flavour() -> None:
    sp = next(p for p in study_points(*JOINT_STUDY) if study_group(p) == "sglang" and p.load == 6.0)
    eng = study_engine(sp)
    assert eng.flavour == "sglang" and eng.cfg["attention_backend"] == "triton"
    # the same trial as SGLang's single-engine study (same workload, seed, duration, warm-ups, load): same figures;
    # simulated as vLLM they would differ
    alone = next(p for p in study_points(SGLANG_ALONE) if p.load == 6.0)
    assert alone.engine == "sglang" and alone.args == sp.args
    sim = simulate_study_point(sp)
    assert sim == simulate_study_point(alone)
    assert sim["output_throughput"] != simulate_study_point(dataclasses.replace(sp, engine="vllm"))["output_throughput"]
