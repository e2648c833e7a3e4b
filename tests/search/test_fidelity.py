"""The rung rule: a capacity search stops once the config cannot beat the incumbent."""

from __future__ import annotations

import pytest

from tuner.spec.sla import parse_sla
from tuner.trial.fidelity import RungStop, StopTrial

SLA = parse_sla("p99_ttft_ms <= 1000")


def _pt(tput: float, ttft: float) -> dict[str, float]:
    return {"output_throughput": tput, "p99_ttft_ms": ttft}


def test_stops_when_the_sla_breaks_below_the_incumbent() -> None:
    hook = RungStop(incumbent=1000.0, sla=SLA)
    hook(_pt(400, 200))
    hook(_pt(700, 600))
    with pytest.raises(StopTrial) as info:
        hook(_pt(800, 1500))  # capacity is below this load: at most 800 tokens/s
    assert info.value.lower == 700 and info.value.upper == 800
    assert "incumbent" in info.value.reason and hook.points == 3


def test_keeps_going_when_it_could_still_win() -> None:
    hook = RungStop(incumbent=1000.0, sla=SLA, margin=0.05)
    hook(_pt(700, 600))
    hook(_pt(990, 1400))  # within the margin of the incumbent: the bisection may still beat it
    hook(_pt(1200, 900))
    assert hook.lower == 1200


def test_no_incumbent_never_stops() -> None:
    hook = RungStop(incumbent=None, sla=SLA)
    for p in (_pt(10, 5000), _pt(5, 9000)):
        hook(p)
    assert hook.upper == 5 and hook.lower is None


def test_reads_a_load_point_object_with_a_summary() -> None:
    class Point:
        summary = _pt(100, 5000)

    with pytest.raises(StopTrial):
        RungStop(incumbent=1000.0, sla=SLA)(Point())


def test_stops_when_the_sla_breaks_below_the_incumbents_capacity() -> None:
    hook = RungStop(incumbent=1000.0, sla=SLA, incumbent_load=12.0)
    hook({**_pt(300, 200), "load": 4.0})
    hook({**_pt(1500, 2000), "load": 16.0})  # above the incumbent's capacity: may still win
    with pytest.raises(StopTrial) as info:
        hook({**_pt(1100, 1800), "load": 8.0})  # capacity < 8 < 12: cannot win
    assert "capacity" in info.value.reason and info.value.lower == 300


def test_a_point_stopped_early_bounds_nothing_and_a_met_point_near_the_incumbent_goes_on() -> None:
    """On the H200 (dynamic mix, FP8 + 2048 tokens a step): 12 req/s met the SLA at 3,370 tok/s against
    the incumbent's 3,336, then 16 req/s was stopped early by the TTFT rule after a few seconds (1,051
    tok/s measured). The old rule took 1,051 as the trial's upper bound and stopped it, so the study's
    winner lost its bisection point and its per-request records."""

    class Point:
        def __init__(self, summary: dict[str, float], stopped_early: str | None = None) -> None:
            self.summary, self.stopped_early = summary, stopped_early

    hook = RungStop(incumbent=3336.0, sla=SLA, incumbent_load=12.0)
    hook(Point({**_pt(1700, 300), "load": 6.0}))
    hook(Point({**_pt(3370, 700), "load": 12.0}))
    hook(Point({**_pt(1051, 2500), "load": 16.0}, stopped_early="sla: 5 of 480 requests already over"))
    assert hook.upper is None and hook.lower == 3370
    cut = RungStop(incumbent=3336.0, sla=SLA)
    cut(Point(_pt(900, 300)))
    cut(Point(_pt(1051, 2500), stopped_early="sla: over"))  # no bound from it: keep measuring
    with pytest.raises(StopTrial):
        cut(Point(_pt(1200, 1500)))  # a full point over the SLA at 1,200: cannot reach 3,336
