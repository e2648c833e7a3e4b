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
