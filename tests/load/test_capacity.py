"""Capacity search: against a deterministic queue stand-in (exact answer known by brute force),
the real simulator's virtual face, and a real HTTP server with early stop."""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from tuner.load.capacity import find_capacity, measure_point
from tuner.load.records import Request, RequestRecord
from tuner.load.target import HttpTarget, Sink
from tuner.spec.load import validate
from tuner.spec.sla import parse_sla
from tuner.spec.study import CapacitySettings
from tuner.spec.workload import Workload

WL = validate(Workload, {"classes": [{"name": "a", "weight": 1, "input": {"dist": "uniform", "low": 50, "high": 150},
                                      "output": {"dist": "uniform", "low": 5, "high": 20}}],
                         "warmup_requests": 2}, "test")


class QueueTarget:
    """k FIFO servers; service = prefill 2 ms per 100 input tokens + 5 ms per output token.
    Deterministic given the requests, and monotone in load (same seed: same lengths, scaled arrivals)."""

    def __init__(self, servers: int = 2) -> None:
        self.servers = servers
        self.calls = 0

    def run(self, requests: Sequence[Request], *, concurrency: int | None = None,
            sink: Sink | None = None) -> list[RequestRecord]:
        self.calls += 1
        free = [0.0] * self.servers
        inflight: list[float] = []  # finish times, closed loop
        out = []
        for r in requests:
            arrive = r.arrival_s
            if concurrency is not None:
                arrive = heapq.heappop(inflight) if len(inflight) >= concurrency else 0.0
            start = max(arrive, heapq.heappop(free))
            prefill = 0.02 * r.input_len / 1000
            times = [start + prefill + 0.005 * k for k in range(r.output_len)]
            heapq.heappush(free, times[-1])
            if concurrency is not None:
                heapq.heappush(inflight, times[-1])
            rec = RequestRecord(id=r.id, cls=r.cls, input_len=r.input_len, output_len=r.output_len, sent_s=arrive,
                                first_token_s=times[0], done_s=times[-1], token_times=times,
                                output_tokens=r.output_len, warmup=r.warmup)
            out.append(rec)
            if sink:
                sink(rec)
        return out


def brute_force(settings: CapacitySettings, sla: str, loads: Sequence[float]) -> float | None:
    best = None
    for load in loads:
        point, _ = measure_point(QueueTarget(), WL, parse_sla(sla), settings, load, seed=0)
        if not point.feasible:
            break
        best = load
    return best


def test_rate_search_matches_brute_force() -> None:
    settings = CapacitySettings(mode="rate", low=1, high=256, tolerance=0.02, max_points=12, requests_per_point=400)
    seen: list[float] = []
    res = find_capacity(QueueTarget(), WL, parse_sla("p99_ttft_ms<=100"), settings, seed=0,
                        on_point=lambda p: seen.append(p.load))
    truth = brute_force(settings, "p99_ttft_ms<=100", [x / 4 for x in range(4, 4 * 80)])
    assert truth is not None and res.capacity is not None and res.best is not None
    assert truth * 0.97 <= res.capacity <= truth + 0.25
    assert seen[:4] == [1, 2, 4, 8] and len(seen) == len(res.points) <= 12
    assert res.best.summary["p99_ttft_ms"] <= 100 and res.best.summary["load"] == res.capacity
    bad = [p for p in res.points if not p.feasible]
    assert bad and min(p.load for p in bad) > res.capacity
    assert len([r for r in res.records if not r.warmup]) == 400


def test_concurrency_search_is_integer_and_exact() -> None:
    settings = CapacitySettings(mode="concurrency", low=1, high=64, tolerance=0.01, max_points=12,
                                requests_per_point=200)
    res = find_capacity(QueueTarget(servers=4), WL, parse_sla("p99_e2el_ms<=200"), settings, seed=0)
    loads = [p.load for p in res.points]
    assert all(x == int(x) for x in loads)
    truth = None
    for c in range(1, 65):
        p, _ = measure_point(QueueTarget(servers=4), WL, parse_sla("p99_e2el_ms<=200"), settings, c, seed=0)
        if not p.feasible:
            break
        truth = c
    assert res.capacity == truth


def test_bounds_lowest_infeasible_and_highest_feasible() -> None:
    settings = CapacitySettings(mode="rate", low=4, high=8, requests_per_point=100)
    none = find_capacity(QueueTarget(), WL, parse_sla("p99_ttft_ms<=1"), settings, seed=0)
    assert none.capacity is None and none.best is None and len(none.points) == 1
    assert none.records and none.points[0].violation > 0
    top = find_capacity(QueueTarget(), WL, parse_sla("p99_ttft_ms<=10000"), settings, seed=0)
    assert top.capacity == 8 and [p.load for p in top.points] == [4, 8]


def test_virtual_target_with_the_simulator() -> None:
    sim = pytest.importorskip("tuner.sim")
    from tuner.load.target import VirtualTarget

    engine = sim.SimulatedEngine(flavour="vllm", gpu="H200", shape=sim.shape_for("Qwen/Qwen3-8B"), args={},
                                 max_model_len=8192)
    settings = CapacitySettings(mode="rate", low=1, high=512, tolerance=0.05, max_points=10, requests_per_point=300)
    wl = validate(Workload, {"profile": "dynamic", "warmup_requests": 0}, "test")
    res = find_capacity(VirtualTarget(engine), wl, parse_sla("p99_ttft_ms<=500"), settings, seed=0,
                        max_model_len=8192)
    assert res.capacity is not None and res.best is not None and res.best.feasible
    assert any(not p.feasible for p in res.points) or res.capacity == 512
    assert res.best.summary["output_throughput"] > 0 and "class.education.p99_ttft_ms" in res.best.summary


def test_http_capacity_with_early_stop(fake_server: Callable[..., Any]) -> None:
    srv = fake_server("--ttft-ms", "10", "--itl-ms", "2", "--max-running", "2")  # ~28 ms/request, 2 slots
    wl = validate(Workload, {"classes": [{"name": "a", "weight": 1, "input": {"dist": "fixed", "value": 8},
                                          "output": {"dist": "fixed", "value": 10}}], "warmup_requests": 2}, "t")
    settings = CapacitySettings(mode="rate", low=8, high=1024, tolerance=0.1, max_points=6, duration_s=2.0)
    res = find_capacity(HttpTarget(srv.url, "fake"), wl, parse_sla("p99_ttft_ms<=1000"), settings, seed=0)
    # 2 slots of ~28 ms serve ~70 req/s: from 128 req/s the queue grows by ~60 requests a second and
    # TTFT passes 1 s within the point; 8 req/s meets it even on a busy machine
    seen = [(p.load, round(p.violation, 2), p.stopped_early) for p in res.points]
    assert res.capacity is not None and 8 <= res.capacity < 256, seen
    stopped = [p for p in res.points if p.stopped_early]
    assert stopped and all(not p.feasible for p in stopped), seen
    assert all(math.isfinite(p.summary["request_throughput"]) for p in res.points)
