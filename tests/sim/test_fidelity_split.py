"""Held-out points are classed by what they differ in (resolved engine args, rate, shape), not by name."""

from __future__ import annotations

import dataclasses

from tests.sim.simhelp import engine, poisson, ttfts
from tuner.sim.calibration import FITTED
from tuner.sim.engine import SimulatedEngine
from tuner.sim.reference import ALL_POINTS, FIT_SET, RefPoint, split_of

BY_NAME = {p.name: p for p in ALL_POINTS}


def test_a_rerun_of_a_fitted_point_is_not_held_out() -> None:
    assert split_of(BY_NAME["default_rerun"]) == "repeat"


def test_same_config_at_an_unfitted_rate_is_held_out_by_rate() -> None:
    assert split_of(BY_NAME["mns64_r4"]) == "rate"


def test_unfitted_engine_args_are_held_out_by_args() -> None:
    assert split_of(BY_NAME["gmu095"]) == "args"
    assert split_of(BY_NAME["mns128_mbt4k_r6"]) == "args"


def test_explicit_defaults_count_as_the_default_config() -> None:
    p = RefPoint("x", "bench_default.json", {"max_num_seqs": 1024, "max_num_batched_tokens": 8192}, rate=3.0)
    assert p.config_key() == BY_NAME["default"].config_key()
    assert split_of(p) == "rate"


def test_an_unfitted_model_shape_is_held_out_by_shape() -> None:
    assert split_of(RefPoint("x", "bench_default.json", shape="qwen3-14b")) == "shape"
    assert all(split_of(p) == "fit" for p in ALL_POINTS if p.name in FIT_SET)


def _with_ingress(per_seq: float) -> SimulatedEngine:
    cal = dataclasses.replace(FITTED, ingress_per_seq_s=per_seq)
    return SimulatedEngine(flavour="vllm", gpu="H200", shape="qwen3-8b", args={}, max_model_len=16384,
                           calibration=cal)


def test_ingress_delays_first_tokens_under_load_only() -> None:
    reqs = poisson(120, 10.0)
    base, slow = _with_ingress(0.0).run(reqs), _with_ingress(1e-3).run(reqs)
    assert sorted(ttfts(slow))[60] > sorted(ttfts(base))[60] + 0.02  # ~dozens of running sequences x 1 ms
    # one request at a time: nothing is running when a request is sent, so nothing changes
    one = [dataclasses.replace(r, arrival_s=r.arrival_s * 100) for r in poisson(10, 10.0)]
    assert [r.token_times for r in _with_ingress(0.0).run(one)] == [r.token_times for r in _with_ingress(1e-3).run(one)]
    assert engine().run(one)[0].ok
