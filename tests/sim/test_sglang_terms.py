"""SGLang's own step-cost terms (tuner/sim/sglang_cost.py) against the H200 SGLang runs they were fitted and held
out on (benchmarks/calibrate_sglang.py): each check fails with the vLLM-fitted calibration alone."""

from __future__ import annotations

import dataclasses
import statistics

import pytest

from benchmarks.calibrate_sglang import (
    JOINT_T1,
    JOINT_T3,
    TRITON_BF16,
    TRITON_FP8,
    decode_samples,
    predicted,
    simulate_point,
)
from tuner.load.records import Request
from tuner.sim.calibration import FITTED, SGLANG_FIT_POINTS, SGLANG_FITTED, SGLANG_FITTED_H100
from tuner.sim.engine import SimulatedEngine
from tuner.sim.reference import JOINT_STUDY, StudyPoint, simulate_study_point, study_engine, study_points
from tuner.sim.sglang_cost import SGLangTerms, sglang_calibration


def _engine(args: dict[str, str], terms: SGLangTerms | None = SGLANG_FITTED, flavour: str = "sglang") -> SimulatedEngine:
    return SimulatedEngine(flavour=flavour, gpu="H200", shape="qwen3-8b", args=args, max_model_len=16384,
                           sglang_terms=terms)


def _step_s(eng: SimulatedEngine, n: int, ctx: float) -> float:
    return eng.cost.decode_base(n, True) + eng.cost.dec_b * ctx


@pytest.mark.parametrize(("log", "args", "point"), [
    (JOINT_T1, TRITON_BF16, 2),
    pytest.param(JOINT_T3, TRITON_FP8, 0, marks=pytest.mark.xfail(strict=True, reason=(
        "since the five-shape weight-read floor (issue 17: 50 us per layer, FP8 weights pay it in full) the held-out "
        "FP8 step is 7.0 % long (6.65 vs 6.21 ms); the vLLM FP8 closed-loop points are too slow too (docs/sim.md)"))),
])
def test_held_out_decode_steps_at_3_to_4_sequences_match_the_log(log: object, args: dict[str, str], point: int) -> None:
    """Held-out log segments (BF16 @9, FP8 @6): the median decode step at 3-4 running sequences (the warm-up's
    ~15k context tokens) within 5 %; the base calibration is 25-45 % short."""
    samples = [s for s in decode_samples(log)[point] if 3 <= s[0] <= 4]  # type: ignore[arg-type]
    assert len(samples) >= 5
    real = statistics.median(s[2] for s in samples)
    ctx = statistics.median(s[1] for s in samples)
    n = round(statistics.median(s[0] for s in samples))
    assert abs(_step_s(_engine(args), n, ctx) / real - 1) < 0.05
    assert _step_s(_engine(args, None), n, ctx) / real - 1 < -0.15


def _joint(trial: int, load: float) -> StudyPoint:
    return next(sp for sp in study_points(*JOINT_STUDY) if sp.engine == "sglang" and sp.trial == trial
                and sp.load == load)


def test_held_out_bf16_point_tpot_and_ttft_within_5_percent() -> None:
    """Joint trial 1 (triton, BF16) at 9 req/s, not fitted on: P50/P99 TPOT and TTFT within 5 % (without the
    SGLang terms: TPOT50 -28 %, TTFT99 -24 %)."""
    sp = _joint(1, 9.0)
    assert (sp.results, sp.trial, sp.load) not in SGLANG_FIT_POINTS
    sim, real = simulate_study_point(sp), dict(sp.real)
    for f in ("p50_tpot_ms", "p99_tpot_ms", "p50_ttft_ms", "p99_ttft_ms", "output_throughput"):
        assert abs(sim[f] / real[f] - 1) < 0.05, (f, sim[f], real[f])


@pytest.mark.parametrize(("trial", "load"), [(1, 9.0), (3, 12.0)])
def test_held_out_sla_verdicts_agree(trial: int, load: float) -> None:
    """The two SGLang points whose SLA verdict the sim had wrong (it said 'meets'; the engine missed P99 TPOT):
    right with the SGLang terms, wrong without any of them."""
    sp = _joint(trial, load)
    sim, real = simulate_study_point(sp), dict(sp.real)
    assert real["p99_tpot_ms"] > 50.0 * 1.03  # a miss, not near the limit
    assert sim["p99_tpot_ms"] > 50.0
    assert simulate_point(sp, None)["p99_tpot_ms"] < 50.0


def test_no_terms_is_the_calibration_alone_and_vllm_never_sees_them() -> None:
    assert sglang_calibration(FITTED, None, "triton") is FITTED
    assert _engine(TRITON_BF16, None).cal == FITTED
    vllm_a, vllm_b = _engine({}, SGLANG_FITTED, "vllm"), _engine({}, None, "vllm")
    assert vllm_a.cal == vllm_b.cal == FITTED
    assert _step_s(vllm_a, 8, 40000.0) == _step_s(vllm_b, 8, 40000.0)


def test_triton_terms_only_with_the_triton_backend() -> None:
    tri, other = _engine(TRITON_BF16).cal, _engine({}).cal
    assert tri.e_kv == SGLANG_FITTED.triton_e_kv and tri.e_attn == SGLANG_FITTED.triton_e_attn
    assert other.e_kv == FITTED.e_kv and other.e_attn == FITTED.e_attn
    assert tri.o_step_s == other.o_step_s == FITTED.o_step_s + SGLANG_FITTED.step_extra_s


def test_overlap_scheduler_admits_a_request_one_step_later() -> None:
    """One long decode running; a prompt arriving mid-step waits for that step and, with the overlap scheduler,
    one more: its TTFT grows by about one decode step."""
    reqs = [Request(0, 0.0, 1000, 400), Request(1, 0.5013, 200, 5)]
    on = _engine(TRITON_BF16)
    off = _engine(TRITON_BF16, dataclasses.replace(SGLANG_FITTED, overlap=0))
    ttft = [(r[1].first_token_s - r[1].sent_s) for r in (on.run(reqs), off.run(reqs))]  # type: ignore[operator]
    step = _step_s(on, 1, 1200.0)
    assert 0.5 * step < ttft[0] - ttft[1] < 1.5 * step


def test_sweep_log_confirms_the_triton_kv_read_term() -> None:
    """The lead's H200 rate sweep (another server config, never fitted on): regressing its decode log as
    calibrate_sglang.py does gives a triton KV-read efficiency within 10 % of the studies' 0.713."""
    import numpy as np

    from benchmarks.calibrate_sglang import predicted, sweep_decode_samples

    smp = sweep_decode_samples()
    plain = _engine(TRITON_BF16, None)
    ctx = np.array([s[1] for s in smp])
    y = np.array([s[2] for s in smp]) - (predicted(plain, smp) - plain.cost.dec_b * ctx)
    (_, slope), *_ = np.linalg.lstsq(np.c_[np.ones(len(smp)), ctx], y, rcond=None)
    e_kv = plain.cost.dec_b * plain.cal.e_kv / slope
    assert len(smp) > 100 and abs(e_kv / SGLANG_FITTED.triton_e_kv - 1) < 0.10


def _default(gpu: str) -> SimulatedEngine:
    return SimulatedEngine(flavour="sglang", gpu=gpu, shape="qwen3-8b", args=dict(TRITON_BF16), max_model_len=16384)


def test_terms_are_chosen_by_card() -> None:
    """By default an SGLang engine runs on its card's fit: the H100's own decode terms there, the H200's elsewhere;
    terms passed in win, and the H100's prefill steps keep the H200's fixed extra."""
    h100, h200, a100 = _default("H100"), _default("H200"), _default("A100")
    assert h100.cal.e_kv == SGLANG_FITTED_H100.triton_e_kv != SGLANG_FITTED.triton_e_kv
    assert h100.cal.kv_seq_s == SGLANG_FITTED_H100.triton_kv_seq_s > 0
    assert h100.cal.o_step_s == h200.cal.o_step_s == FITTED.o_step_s + SGLANG_FITTED.step_extra_s
    assert h100.cal.dec_step_extra_s == pytest.approx(SGLANG_FITTED_H100.triton_decode_s - SGLANG_FITTED.step_extra_s)
    assert h200.cal.e_kv == a100.cal.e_kv == SGLANG_FITTED.triton_e_kv and h200.cal.kv_seq_s == 0
    forced = SimulatedEngine(flavour="sglang", gpu="H100", shape="qwen3-8b", args=dict(TRITON_BF16),
                             max_model_len=16384, sglang_terms=SGLANG_FITTED)
    assert forced.cal == _engine(TRITON_BF16).cal
    with pytest.raises(ValueError, match="sglang_terms"):
        SimulatedEngine(flavour="sglang", gpu="H100", shape="qwen3-8b", args={}, max_model_len=16384,
                        sglang_terms="h100")


def test_a_study_point_runs_on_the_terms_it_is_given() -> None:
    """reference.simulate_study_point passes SGLang terms through (benchmarks/sglang_batch_probe_h200.py judges a
    fit that way): the H100's decode terms move an H200 point's TPOT; the default is the card's own (the H200's)."""
    sp = _joint(1, 9.0)
    assert study_engine(sp).cal == study_engine(sp, sglang_terms=SGLANG_FITTED).cal
    assert study_engine(sp, sglang_terms=SGLANG_FITTED_H100).cal.kv_seq_s == SGLANG_FITTED_H100.triton_kv_seq_s > 0
    given = simulate_study_point(sp, sglang_terms=SGLANG_FITTED_H100)["p50_tpot_ms"]
    assert given != simulate_study_point(sp)["p50_tpot_ms"]


def test_h100_decode_step_follows_the_batch_probe() -> None:
    """The H100 terms hold the probe's median decode steps (benchmarks/results/sim/sglang_batch_probe.txt) within
    11 % at every batch size, where the H200's read up to 29 % slow on the same card."""
    from benchmarks.sglang_batch_probe import probe_samples

    got = {w: s for w, s in probe_samples().items() if len(s) >= 3}
    assert len(got) == 11
    h100, h200 = _default("H100"), SimulatedEngine(flavour="sglang", gpu="H100", shape="qwen3-8b",
                                                   args=dict(TRITON_BF16), max_model_len=16384,
                                                   sglang_terms=SGLANG_FITTED)
    worst = {"h100": 0.0, "h200": 0.0}
    for samples in got.values():
        real = statistics.median(s[2] for s in samples)
        for name, eng in (("h100", h100), ("h200", h200)):
            sim = statistics.median(float(x) for x in predicted(eng, samples))
            worst[name] = max(worst[name], abs(sim / real - 1))
    assert worst["h100"] < 0.11 < 0.25 < worst["h200"]
