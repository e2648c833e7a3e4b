"""Multi-fidelity: stop a trial's capacity search once the config provably cannot beat the incumbent.

A capacity search measures load points; the objective is the throughput at the highest load that
meets the SLA. Once some point violates the SLA, the capacity lies below that load, so (1) the
objective cannot exceed (about) the throughput measured there, and (2) for throughput objectives
of a fixed workload, if that load is already below the incumbent's capacity the config cannot win.
When either bound is below the incumbent by more than a margin, the remaining points (the
bisection) are wasted GPU time: `RungStop`, passed as find_capacity's per-point hook, raises
`StopTrial`. The trial is then
reported with the best SLA-feasible point it measured (a true lower bound), not a fake zero.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tuner.spec.sla import SLATerm, meets

# Objectives that grow with the sustained load of a fixed workload: a lower capacity cannot win.
LOAD_SCALED = ("output_throughput", "total_token_throughput", "request_throughput", "request_goodput")


class StopTrial(Exception):
    """Raised by `RungStop` to end a capacity search early; carries what was learned."""

    def __init__(self, reason: str, lower: float | None, upper: float | None) -> None:
        self.reason, self.lower, self.upper = reason, lower, upper
        super().__init__(reason)


@dataclass
class RungStop:
    """Per-point hook: stop when the config's objective upper bound is below the incumbent by `margin`."""

    incumbent: float | None  # best SLA-feasible objective of the study so far (None: never stop)
    sla: Sequence[SLATerm]
    metric: str = "output_throughput"
    margin: float = 0.05  # relative: stop when upper * (1 + margin) < incumbent
    incumbent_load: float | None = None  # the incumbent's capacity (req/s or concurrency)
    lower: float | None = None  # best objective at an SLA-feasible point so far
    upper: float | None = None  # objective at the lowest SLA-violating point so far
    points: int = 0

    def __call__(self, point: Any) -> None:
        """Look at one measured point (anything with a `summary` mapping, or the mapping itself)."""
        summary = getattr(point, "summary", point)
        if not isinstance(summary, Mapping):
            return
        self.points += 1
        value = summary.get(self.metric)
        if value is None or value != value:
            return
        if meets(list(self.sla), dict(summary)):
            self.lower = value if self.lower is None else max(self.lower, value)
            return
        # A point stopped early (tuner.load.earlystop) measured a cut-short window: its throughput bounds
        # nothing (1,051 tok/s for a 16 req/s point on the H200 whose 12 req/s point had made 3,370).
        cut_short = bool(getattr(point, "stopped_early", None) or summary.get("stopped_early"))
        if not cut_short:
            self.upper = value if self.upper is None else min(self.upper, value)
        if self.incumbent is None or self.incumbent <= 0:
            return
        if self.lower is not None and self.lower * (1.0 + self.margin) >= self.incumbent:
            return  # a point it already met is within reach of the incumbent: the bisection may win
        load = summary.get("load")
        if (self.incumbent_load is not None and self.metric in LOAD_SCALED and isinstance(load, (int, float))
                and load * (1.0 + self.margin) <= self.incumbent_load):
            raise StopTrial(
                f"stopped after {self.points} load point(s): the SLA broke at load {load:g}, so the capacity "
                f"is below the incumbent's {self.incumbent_load:g} by more than {self.margin:.0%}",
                self.lower, self.upper,
            )
        if self.upper is not None and self.upper * (1.0 + self.margin) < self.incumbent:
            raise StopTrial(
                f"stopped after {self.points} load point(s): {self.metric} at most {self.upper:.4g} "
                f"(measured where the SLA broke), below the incumbent {self.incumbent:.4g} by more than "
                f"{self.margin:.0%}",
                self.lower,
                self.upper,
            )


def rung_stop(study: Any, incumbent: float | None, incumbent_load: float | None = None,
              margin: float = 0.05) -> RungStop:
    """The hook for one trial of `study` (a tuner.spec.study.Study) given the searcher's incumbent.

    In a trainable: ``rung_stop(study, config["incumbent"], config["incumbent_capacity"])``.
    """
    return RungStop(incumbent=incumbent, sla=list(study.sla), metric=study.objective.metric, margin=margin,
                    incumbent_load=incumbent_load)
