"""Held-out classes (by resolved engine args, rate, shape, not by name) and the tail terms: API-server ingress, power-limited clock, prompt work deferred to the next step (and its cap)."""

from __future__ import annotations

import dataclasses

from tests.sim.simhelp import engine, out_tok_s, poisson, ttfts
from tuner.load.records import Request
from tuner.sim.calibration import FITTED
from tuner.sim.engine import SimulatedEngine
from tuner.sim.reference import (
    ALL_POINTS,
    DETAILED_POINTS,
    DETAILED_SETS,
    FIT_SET,
    Q14B_POINTS,
    RECORDS,
    REPLAYS,
    RefPoint,
    detailed_run,
    distribution,
    measured,
    replay_requests,
    split_of,
)

BY_NAME = {p.name: p for p in ALL_POINTS}


def test_a_rerun_of_a_fitted_point_is_not_held_out() -> None:
    assert split_of(BY_NAME["default_rerun"]) == "repeat"


def test_same_config_at_an_unfitted_rate_is_held_out_by_rate() -> None:
    assert split_of(BY_NAME["mns64_r4"]) == "rate"


def test_unfitted_engine_args_are_held_out_by_args() -> None:
    assert split_of(BY_NAME["gmu095"]) == "args"
    assert split_of(BY_NAME["mns128_mbt4k_r6"]) == "args"


def test_a_fitted_config_and_rate_measured_by_the_other_client_is_held_out_by_client() -> None:
    # the 8B vllm bench set (text prompts): 6 and 12 req/s fitted only from servetune's client, 9 never
    assert [split_of(BY_NAME[f"qwen3-8b-vbench/default_r{r}"]) for r in ("6", "9", "12")] == ["client", "rate", "client"]
    assert split_of(BY_NAME["default_r6"]) == "client"  # vllm bench, 200 prompts; servetune's t0_default_r6 is fitted
    assert not any(p.set_name.endswith("-8b-vbench") for p in ALL_POINTS if p.name in FIT_SET)


def test_explicit_defaults_count_as_the_default_config() -> None:
    p = RefPoint("x", "bench_default.json", {"max_num_seqs": 1024, "max_num_batched_tokens": 8192}, rate=3.0)
    assert p.config_key() == BY_NAME["default"].config_key()
    assert split_of(p) == "rate"


def test_an_unfitted_model_shape_is_held_out_by_shape() -> None:
    assert split_of(RefPoint("x", "bench_default.json", shape="qwen3-14b")) == "shape"
    assert all(split_of(p) == "fit" for p in ALL_POINTS if p.name in FIT_SET)


def test_the_qwen3_14b_and_32b_runs_are_the_shape_split_and_never_fitted() -> None:
    # sim_fidelity's leave-one-shape-out figures: fails if a set is dropped, fitted, or loses a rate
    held = {p.name for p in ALL_POINTS if split_of(p) == "shape"}
    other_shapes = [p for p in DETAILED_POINTS if p.shape != "qwen3-8b"]
    assert held == {p.name for p in Q14B_POINTS + tuple(other_shapes)} and len(held) == 20
    assert DETAILED_SETS == ("h200-vllm-0.26.0-qwen3-14b-np400", "h200-vllm-0.26.0-qwen3-32b",
                             "h200-vllm-0.26.0-qwen3-8b-vbench", "h200-vllm-0.26.0-qwen3-4b",
                             "h200-vllm-0.26.0-qwen3-1.7b")
    assert {p.shape for p in other_shapes} == {"qwen3-14b", "qwen3-32b", "qwen3-4b", "qwen3-1.7b"}
    q32 = BY_NAME["qwen3-32b/default_r1.75"]
    assert (q32.prompts, q32.rate, q32.max_model_len) == (160, 1.75, 40960)
    assert round(measured(q32)["p99_ttft_ms"], 1) == 876.9  # the lead's summary (gpu-data README)
    q4 = BY_NAME["qwen3-4b/default_r12"]
    assert (q4.prompts, q4.rate) == (300, 12.0) and round(measured(q4)["p99_tpot_ms"], 1) == 22.4  # bench_rates log
    run = detailed_run(BY_NAME["qwen3-14b-np400/default_r3"])
    assert run is not None and len(run) == 399 and run.start_times is not None  # 1 of 400 failed client-side
    assert not held & set(FIT_SET)
    assert all(q.shape == "qwen3-8b" for q in ALL_POINTS if q.name in FIT_SET)
    r3 = BY_NAME["q14b/default_r3"]
    assert (r3.shape, r3.prompts, r3.rate, r3.max_model_len) == ("qwen3-14b", 150, 3.0, 40960)
    assert round(measured(r3)["p99_ttft_ms"], 1) == 321.9  # the vllm bench result file of that run


def _with_ingress(per_seq: float) -> SimulatedEngine:
    cal = dataclasses.replace(FITTED, ingress_per_seq_s=per_seq)
    return SimulatedEngine(flavour="vllm", gpu="H200", shape="qwen3-8b", args={}, max_model_len=16384,
                           calibration=cal)


def test_ingress_delays_first_tokens_under_load_only() -> None:
    reqs = poisson(120, 10.0)
    base, slow = _with_ingress(0.0).run(reqs), _with_ingress(1e-3).run(reqs)
    assert sorted(ttfts(slow))[60] > sorted(ttfts(base))[60] + 0.02  # ~dozens of running sequences x 1 ms
    # one request at a time: nothing is running when a request is sent, so nothing changes
    # (sends 30 s apart: a 512-token request is done in ~5 s; the Poisson draw x100 it used had three within 0.3 s)
    one = [dataclasses.replace(r, arrival_s=30.0 * i) for i, r in enumerate(poisson(10, 10.0))]
    assert [r.token_times for r in _with_ingress(0.0).run(one)] == [r.token_times for r in _with_ingress(1e-3).run(one)]
    assert engine().run(one)[0].ok


def _with_heat(k: float) -> SimulatedEngine:
    cal = dataclasses.replace(FITTED, heat_slowdown=k, heat_tau_s=1.0)
    return SimulatedEngine(flavour="vllm", gpu="H200", shape="qwen3-8b", args={}, max_model_len=16384,
                           calibration=cal)


def test_power_limited_clock_slows_sustained_prefill_more_than_a_lone_one() -> None:
    lone = [dataclasses.replace(r, arrival_s=r.arrival_s * 200) for r in poisson(5, 10.0, out=8)]
    burst = poisson(200, 0.0, out=8)  # all at once: seconds of back-to-back prefill
    cool, hot = _with_heat(0.0), _with_heat(0.5)
    lone_ratio = sorted(ttfts(hot.run(lone)))[2] / sorted(ttfts(cool.run(lone)))[2]
    burst_ratio = max(ttfts(hot.run(burst))) / max(ttfts(cool.run(burst)))
    assert lone_ratio < 1.05  # an idle GPU is cool: a lone prompt runs at full clock
    assert burst_ratio > 1.25  # sustained compute: FLOP-bound steps slow toward 1 + heat_slowdown


# the deferral form (shipped before issue 17's hold replaced it: tuner/sim/calibration.py): the hold off, its launch
# terms back to the drawn floor they were
DEFER_BASE = dataclasses.replace(FITTED, prompt_hold=0, prompt_cpu_step_s=0.015, prompt_cpu_step_cv=1.0,
                                 prompt_cpu_layer_s=0.0, ingress_rho_max=0.0, ingress_s=0.0, ingress_tok_s=0.0,
                                 sched_after_launch=0)


def _with_defer(share: float, lead_max: float = 0.0) -> SimulatedEngine:
    cal = dataclasses.replace(DEFER_BASE, prompt_defer=share, prompt_lead_max_s=lead_max, ingress_per_seq_s=0.0)
    return SimulatedEngine(flavour="vllm", gpu="H200", shape="qwen3-8b", args={}, max_model_len=16384,
                           calibration=cal)


def test_prompt_defer_moves_a_share_of_the_prompt_step_and_the_first_token_to_the_next_step() -> None:
    # one long decode, then a 2048-token prompt arrives: its step is the decode's long gap
    reqs = [Request(0, 0.0, 128, 400), Request(1, 1.0, 2048, 50)]
    whole, split = _with_defer(0.0).run(reqs), _with_defer(0.4).run(reqs)
    gaps_w = [b - a for a, b in zip(whole[0].token_times, whole[0].token_times[1:], strict=False)]
    gaps_s = [b - a for a, b in zip(split[0].token_times, split[0].token_times[1:], strict=False)]
    k = max(range(len(gaps_w)), key=gaps_w.__getitem__)
    normal = gaps_w[k - 1]
    excess = gaps_w[k] - normal
    assert excess > 0.03  # a 2048-token prefill is tens of ms on an H200
    assert abs(gaps_s[k] - (gaps_w[k] - 0.4 * excess)) < 1e-4  # the prompt step lasts 0.6 of its extra time
    assert abs(gaps_s[k + 1] - (gaps_w[k + 1] + 0.4 * excess)) < 1e-4  # the next step carries the rest
    assert abs(split[0].done_s - whole[0].done_s) < 1e-6  # no time made or lost
    # the new request's first token comes with the next step, with the running request's token
    assert whole[1].first_token_s == whole[0].token_times[k + 1]
    assert split[1].first_token_s == split[0].token_times[k + 2]
    assert split[1].output_tokens == 50 and split[1].ok


def test_prompt_lead_max_caps_the_decodes_wait_in_a_step_with_two_prompts() -> None:
    # two 2048-token prompts arrive together next to a long decode: one step carries both
    reqs = [Request(0, 0.0, 128, 400), Request(1, 1.0, 2048, 50), Request(2, 1.0, 2048, 50)]
    gaps = {}
    for lead in (0.0, 0.04):
        recs = _with_defer(0.3, lead).run(reqs)
        tt = recs[0].token_times
        gaps[lead] = [b - a for a, b in zip(tt, tt[1:], strict=False)]
        assert all(r.ok and r.output_tokens == r.output_len for r in recs)
    whole = _with_defer(0.0).run(reqs)[0].token_times
    gaps_w = [b - a for a, b in zip(whole, whole[1:], strict=False)]
    k = max(range(len(gaps_w)), key=gaps_w.__getitem__)
    normal = gaps_w[k - 1]
    excess = gaps_w[k] - normal
    assert excess > 0.08  # two prompts: about twice a lone one's extra time
    assert abs(gaps[0.0][k] - (normal + 0.7 * excess)) < 1e-4  # no cap: 0.7 of the extra time
    assert abs(gaps[0.04][k] - (normal + 0.04)) < 1e-4  # capped: the decodes wait for 40 ms of it
    # the next step carries the rest (within 0.5 ms: without the defer the two new requests decode in it too)
    assert abs(gaps[0.04][k + 1] - (gaps_w[k + 1] + excess - 0.04)) < 5e-4
    assert abs(gaps[0.04][k + 1] - (gaps[0.0][k + 1] + 0.7 * excess - 0.04)) < 1e-6  # same step, cap aside
    # a lone prompt's extra time below the cap: the cap changes nothing
    lone = [Request(0, 0.0, 128, 400), Request(1, 1.0, 2048, 50)]
    assert _with_defer(0.3, 0.2).run(lone)[0].token_times == _with_defer(0.3).run(lone)[0].token_times


def test_prompt_defer_max_caps_what_a_prompt_step_hands_to_the_next_one() -> None:
    # one and two 2048-token prompts next to a long decode (the one-prompt fast path and the general step)
    for n_prompts in (1, 2):
        reqs = [Request(0, 0.0, 128, 400)] + [Request(i, 1.0, 2048, 50) for i in range(1, n_prompts + 1)]
        whole = _with_defer(0.0).run(reqs)[0].token_times
        gaps_w = [b - a for a, b in zip(whole, whole[1:], strict=False)]
        k = max(range(len(gaps_w)), key=gaps_w.__getitem__)
        excess = gaps_w[k] - gaps_w[k - 1]
        free = _with_defer(0.3).run(reqs)[0].token_times
        cal = dataclasses.replace(DEFER_BASE, prompt_defer=0.3, prompt_lead_max_s=0.0, prompt_defer_max_s=0.005,
                                  ingress_per_seq_s=0.0)
        capped = SimulatedEngine(flavour="vllm", gpu="H200", shape="qwen3-8b", args={}, max_model_len=16384,
                                 calibration=cal).run(reqs)
        assert all(r.ok and r.output_tokens == r.output_len for r in capped)
        tt = capped[0].token_times
        gaps_f = [b - a for a, b in zip(free, free[1:], strict=False)]
        gaps_c = [b - a for a, b in zip(tt, tt[1:], strict=False)]
        assert 0.3 * excess > 0.01  # uncapped the next step would carry more than 10 ms
        assert abs(gaps_c[k] - (gaps_f[k] + 0.3 * excess - 0.005)) < 1e-6  # the decodes wait for all but 5 ms
        assert abs(gaps_c[k + 1] - (gaps_f[k + 1] - 0.3 * excess + 0.005)) < 1e-6  # the next step carries 5 ms
        assert abs(tt[-1] - free[-1]) < 1e-6  # no time made or lost


def test_prompt_defer_keeps_saturation_throughput() -> None:
    reqs = poisson(150, 0.0, out=200)
    assert abs(out_tok_s(_with_defer(0.3).run(reqs)) / out_tok_s(_with_defer(0.0).run(reqs)) - 1) < 0.01


def test_sched_ahead_admits_a_request_that_came_during_a_step_one_step_later() -> None:
    reqs = [Request(0, 0.0, 128, 400), Request(1, 1.0, 2048, 20)]
    idx = {}
    for ahead in (0, 1):
        cal = dataclasses.replace(FITTED, sched_ahead=ahead, prompt_defer=0.0, ingress_per_seq_s=0.0)
        recs = SimulatedEngine(flavour="vllm", gpu="H200", shape="qwen3-8b", args={}, max_model_len=16384,
                               calibration=cal).run(reqs)
        idx[ahead] = recs[0].token_times.index(recs[1].first_token_s)
        assert recs[1].ok and recs[1].output_tokens == 20
    assert idx[1] == idx[0] + 1
    # an idle engine takes a request at once either way
    lone = [Request(0, 0.5, 2048, 5)]
    cals = [dataclasses.replace(FITTED, sched_ahead=a) for a in (0, 1)]
    runs = [SimulatedEngine(flavour="vllm", gpu="H200", shape="qwen3-8b", args={}, max_model_len=16384,
                            calibration=c).run(lone)[0].token_times for c in cals]
    assert runs[0] == runs[1]


def test_per_request_records_are_the_reference_points_they_name() -> None:
    # each record set's pooled P99 ITL and P99 TTFT are its reference point's own figures
    for name in RECORDS:
        _, recs = replay_requests(name)
        real = measured(BY_NAME[name])
        got = distribution(recs)
        assert abs(got["itl"][-1] / real["p99_itl_ms"] - 1) < 0.01, name
        assert abs(got["ttft"][-1] / real["p99_ttft_ms"] - 1) < 0.01, name
    assert set(REPLAYS) == {n for n in RECORDS if n in FIT_SET}  # held-out records are never fitted on
    assert len(REPLAYS) == 4


def test_weight_floor_adds_a_fixed_time_per_layer_to_weight_bound_steps_only() -> None:
    from tuner.sim.catalog import get_gpu, get_shape
    from tuner.sim.cost import StepCost

    shape, gpu = get_shape("qwen3-1.7b"), get_gpu("H200")
    off = StepCost(shape, gpu, dataclasses.replace(FITTED, w_floor_layer_s=0.0), 1, 2)
    on = StepCost(shape, gpu, dataclasses.replace(FITTED, w_floor_layer_s=50e-6), 1, 2)
    assert abs(on.decode_base(4, True) - off.decode_base(4, True) - 28 * 50e-6) < 1e-12  # 28 layers
    prefill = {c: c.step(8192, 4, 8192 * 2048.0, 0.0, graphed=False) for c in (on, off)}
    assert prefill[on] == prefill[off]  # FLOP-bound: the weights' read (and its floor) hides under the GEMMs


def test_kv_group_exp_scales_kv_reads_by_the_gqa_group_and_leaves_qwen3_8b_alone() -> None:
    from tuner.sim.catalog import get_gpu, get_shape
    from tuner.sim.cost import StepCost

    gpu, cal = get_gpu("H200"), dataclasses.replace(FITTED, kv_group_exp=0.2)
    for name, group in (("qwen3-1.7b", 2), ("qwen3-8b", 4), ("qwen3-32b", 8)):
        shape = get_shape(name)
        off, on = StepCost(shape, gpu, FITTED, 1, 2), StepCost(shape, gpu, cal, 1, 2)
        assert abs(on.dec_b / off.dec_b - (group / 4) ** 0.2) < 1e-12, name  # the decode step's per-context-token time
        assert on.decode_base(64, True) == off.decode_base(64, True)  # the weights' part is not touched
    eight = get_shape("qwen3-8b")
    assert StepCost(eight, gpu, cal, 1, 2).step(64, 64, 1e5, 1e5, True) == \
        StepCost(eight, gpu, FITTED, 1, 2).step(64, 64, 1e5, 1e5, True)


def test_shape_points_run_with_the_terms_chosen_without_their_shape() -> None:
    from tuner.sim.calibration import SHAPE_LOSO
    from tuner.sim.reference import calibration_for

    held = [p for p in ALL_POINTS if split_of(p) == "shape"]
    assert {p.shape for p in held} == set(SHAPE_LOSO)  # every held-out shape has its own leave-one-out values
    for p in held:
        cal = calibration_for(p)
        assert cal is not None and all(getattr(cal, k) == v for k, v in SHAPE_LOSO[p.shape].items())
    assert calibration_for(BY_NAME["gmu095"]) is None  # the 8B splits run with FITTED itself
