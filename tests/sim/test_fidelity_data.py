"""What the fidelity figures compare against: the client's own arrival draw, warm-ups before the measured
phase in virtual time, the FP8 weight-read term, and which study points are fitted on."""

from __future__ import annotations

import dataclasses

import numpy as np

from tuner.load.records import Request
from tuner.load.target import VirtualTarget
from tuner.sim.calibration import FITTED
from tuner.sim.catalog import get_gpu, get_shape
from tuner.sim.cost import StepCost
from tuner.sim.engine import SimulatedEngine
from tuner.sim.reference import (
    ALL_POINTS,
    RECORDS,
    STUDY_SETS,
    client_arrivals,
    replay_requests,
    study_group,
    study_points,
)

BY_NAME = {p.name: p for p in ALL_POINTS}


def test_servetune_points_are_simulated_with_the_send_times_the_client_really_used() -> None:
    # every per-request record set: the regenerated draw lies within the client's send lag of the real sends
    for name in RECORDS:
        reqs, _ = replay_requests(name)
        sent = np.array([r.arrival_s for r in reqs])
        drawn = client_arrivals(BY_NAME[name])
        assert len(drawn) == len(sent), name
        assert np.max(np.abs(np.sort(sent) - drawn)) < 0.05, name


def test_vllm_bench_points_share_one_draw_scaled_by_the_rate() -> None:
    # `vllm bench serve --seed 0` re-seeds numpy's global RNG per call: every config and rate draws the same gaps
    a, b = client_arrivals(BY_NAME["default_r4"]), client_arrivals(BY_NAME["mns64_r6"])
    assert np.allclose(a * 4.0, b * 6.0)
    assert abs(a[-1] - 200 / 4.0) < 1e-9  # rescaled so the last send lands at n / rate, as vllm bench does
    assert not np.allclose(a, np.sort(np.random.default_rng(0).uniform(0, 50, 200)))
    # the Qwen3-14B set ran the same client (150 prompts): the first 150 gaps of that draw, rescaled to 150 / rate
    c, d = client_arrivals(BY_NAME["q14b/default_r3"]), client_arrivals(BY_NAME["q14b/default_r6"])
    assert np.allclose(c * 3.0, d * 6.0) and abs(c[-1] - 150 / 3.0) < 1e-9
    assert np.allclose(np.diff(c) / np.diff(a[:150]), c[-1] / a[149])


def test_virtual_target_runs_the_warm_ups_before_the_measured_phase() -> None:
    eng = SimulatedEngine(flavour="vllm", gpu="H200", shape="qwen3-8b", args={}, max_model_len=16384)
    warm = [Request(i, 0.0, 4000, 64, warmup=True) for i in range(8)]
    measured = [Request(8 + i, 0.05 * i, 2048, 64) for i in range(20)]
    alone = {r.id: r.ttft_s for r in eng.run(measured)}
    together = {r.id: r.ttft_s for r in eng.run(warm + measured) if not r.warmup}
    got = {r.id: r.ttft_s for r in VirtualTarget(eng).run(warm + measured) if not r.warmup}
    assert got == alone
    assert together[8] > 2 * alone[8]  # run together, the first measured prompt queues behind 8 warm-ups


def test_fp8_weight_read_gain_two_is_the_halved_bytes_and_one_is_no_gain() -> None:
    shape, gpu = get_shape("qwen3-8b"), get_gpu("H200")
    bf16 = StepCost(shape, gpu, FITTED, 1, 2)
    half = StepCost(shape, gpu, dataclasses.replace(FITTED, fp8_w_gain=2.0), 1, 2, fp8_weights=True)
    none = StepCost(shape, gpu, dataclasses.replace(FITTED, fp8_w_gain=1.0), 1, 2, fp8_weights=True)
    lin = shape.attn_params + shape.mlp_params_per_expert  # the FP8 projections; embedding and lm_head stay bf16
    bw = gpu.hbm_tb_s * 1e12 * FITTED.e_w
    assert abs((bf16.t_dense_w - half.t_dense_w) - lin / bw) < 1e-12
    assert none.t_dense_w == bf16.t_dense_w
    assert half.decode_base(8, True) < none.decode_base(8, True)


def test_only_the_declared_study_points_are_fitted_on() -> None:
    groups = {study_group(sp) for results, study in STUDY_SETS for sp in study_points(results, study)}
    assert {"bf16-dynamic/fit", "fp8/fit", "fp8", "sglang", "sglang-fp8", "bf16-dynamic", "bf16-closed"} == groups
