"""Capacity search: the highest offered load (Poisson rate or concurrency) whose SLA terms hold.

Start at `low` and double until a point violates the SLA or reaches `high` (the saturation bound),
then bisect between the last good and the first bad load until they are within the relative
`tolerance`, using at most `max_points` load points. Every point uses the same seed, so points
differ only in load. Against targets that support it (HttpTarget), a point stops early once its
verdict is known (tuner.load.earlystop); the point is then infeasible and says why.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tuner.load import ruler
from tuner.load.earlystop import EarlyStop
from tuner.load.metrics import summarize
from tuner.load.records import RequestRecord
from tuner.load.target import Target
from tuner.load.workload import abnormal_classes, generate
from tuner.spec.sla import SLATerm, max_violation
from tuner.spec.study import CapacitySettings
from tuner.spec.workload import Workload

ERROR_BUDGET = 0.01  # error rate a point may have when the SLA names no error_rate term
MAX_DURATION_REQUESTS = 200_000  # cap on requests generated for a duration-bound closed-loop point


@dataclass
class LoadPoint:
    load: float
    summary: dict[str, float]
    feasible: bool
    violation: float
    stopped_early: str | None = None


@dataclass
class CapacityResult:
    capacity: float | None
    best: LoadPoint | None
    points: list[LoadPoint] = field(default_factory=list)
    records: list[RequestRecord] = field(default_factory=list)  # of the best point, else the lowest


def point_violation(sla: Sequence[SLATerm], summary: dict[str, float]) -> float:
    """The SLA's largest normalised excess, with the default error budget when no term covers errors."""
    v = max_violation(list(sla), summary)
    if not any(t.name == "error_rate" for t in sla):
        v = max(v, (summary.get("error_rate", 0.0) - ERROR_BUDGET) / ERROR_BUDGET)
    return v


def find_capacity(
    target: Target, workload: Workload, sla: Sequence[SLATerm], settings: CapacitySettings, *,
    seed: int, max_model_len: int | None = None, base_dir: Path | None = None,
    on_point: Callable[[LoadPoint], None] | None = None,
) -> CapacityResult:
    concurrent = settings.mode == "concurrency"
    points: list[LoadPoint] = []
    kept: dict[float, list[RequestRecord]] = {}

    def measure(load: float) -> LoadPoint:
        point, records = measure_point(target, workload, sla, settings, load, seed=seed,
                                       max_model_len=max_model_len, base_dir=base_dir)
        points.append(point)
        kept[load] = records
        if on_point is not None:
            on_point(point)
        return point

    def norm(x: float) -> float:
        return float(max(1, math.floor(x))) if concurrent else x

    good: LoadPoint | None = None
    bad: LoadPoint | None = None
    load = float(max(1, math.ceil(settings.low))) if concurrent else settings.low
    high = norm(settings.high)
    while len(points) < settings.max_points:
        p = measure(load)
        if not p.feasible:
            bad = p
            break
        good = p
        if load >= high:
            break
        load = min(norm(load * 2), high)
    while good is not None and bad is not None and len(points) < settings.max_points:
        a, b = good.load, bad.load
        if b - a <= settings.tolerance * a:
            break
        mid = norm((a + b) / 2)
        if mid <= a or mid >= b:
            break
        p = measure(mid)
        if p.feasible:
            good = p
        else:
            bad = p
    lowest = min(points, key=lambda p: p.load) if points else None
    keep = good or lowest
    return CapacityResult(
        capacity=good.load if good else None, best=good, points=points,
        records=kept.get(keep.load, []) if keep else [],
    )


def measure_point(
    target: Target, workload: Workload, sla: Sequence[SLATerm], settings: CapacitySettings, load: float, *,
    seed: int, max_model_len: int | None = None, base_dir: Path | None = None,
) -> tuple[LoadPoint, list[RequestRecord]]:
    """One load point: generate, run (with early stop where the target supports it), summarize."""
    concurrent = settings.mode == "concurrency"
    rate = None if concurrent else load
    concurrency = int(load) if concurrent else None
    stoppable = bool(getattr(target, "supports_stop", False))
    send_until: float | None = None
    n = settings.requests_per_point
    if settings.duration_s is not None:
        if not concurrent:
            n = max(10, math.ceil(load * settings.duration_s))
        elif stoppable:
            # enough requests for `concurrency` streams of >= 50 ms each; sending stops at the duration
            guess = int(load * settings.duration_s * 20)
            n, send_until = min(MAX_DURATION_REQUESTS, max(n, guess)), settings.duration_s
    requests = generate(workload, n=n, rate=rate, seed=seed, max_model_len=max_model_len, base_dir=base_dir)
    abnormal = abnormal_classes(workload, base_dir)
    if stoppable:
        normal = sum(1 for r in requests if not r.warmup and r.cls not in abnormal)
        stop = EarlyStop(sla=sla, total=normal, open_loop=not concurrent, ignore=frozenset(abnormal))
        records = target.run(requests, concurrency=concurrency, stop=stop,  # type: ignore[call-arg]
                             send_until_s=send_until)
    else:
        records = target.run(requests, concurrency=concurrency)
    stopped = getattr(target, "stopped_early", None) if stoppable else None
    summary = summarize(records, sla=sla, abnormal=abnormal)
    ruler.attach(summary, getattr(target, "last_client", {}), sla)
    summary["load"] = float(load)
    violation = point_violation(sla, summary)
    if stopped:
        violation = max(violation, 1e-3)  # the cancelled, slowest requests are missing from the summary
    return LoadPoint(load=float(load), summary=summary, feasible=violation <= 0 and not stopped,
                     violation=violation, stopped_early=stopped), records
