"""Simulator in the loop: spend a real (GPU) trial only where the simulator cannot rule the config out.

Every candidate carries the calibrated simulator's prediction of the study objective (milliseconds to
get). `SimGate` keeps, per study, a multiplicative correction (median of measured / predicted over the
real trials so far) and the simulator's measured error (the largest relative miss of the corrected
prediction, never below `floor`; `prior_error` until `min_points` real trials ran and met the SLA). A candidate is worth a
real trial only when its corrected prediction widened by that error could beat the incumbent.
`gated_search` runs the loop: after each real trial the correction is updated and every remaining
candidate re-scored; the best upper bound goes next; when none can beat the incumbent, all remaining
are skipped with the reason. Each candidate's record says predicted vs measured and why it was
launched or skipped, so a study can show where its GPU time went.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Candidate:
    """One config with the simulator's prediction (None: the simulator says it cannot meet the SLA or start)."""

    key: Any
    predicted: float | None
    predicted_capacity: float | None = None
    why_none: str = ""  # the simulator's reason when predicted is None


@dataclass
class Record:
    """What happened to one candidate."""

    key: Any
    predicted: float | None
    predicted_capacity: float | None
    corrected: float | None
    upper: float | None
    incumbent: float | None
    launched: bool
    reason: str
    measured: float | None = None
    measured_capacity: float | None = None
    order: int | None = None  # 1-based real-trial number when launched


@dataclass
class SimGate:
    """Correction and error of the simulator for one study, from the real trials measured so far."""

    prior_error: float = 0.3  # assumed relative error before two real trials: the perturbations we guard against
    floor: float = 0.05  # never trust the simulator closer than this
    min_points: int = 3  # fewer pairs say too little about the spread
    twin_tol: float = 0.01  # a candidate predicted this close to a measured config is its twin (not re-run)
    ratios: list[float] = field(default_factory=list)  # measured / predicted per real trial
    pairs: list[tuple[float, float, int]] = field(default_factory=list)  # (predicted, measured, trial) that ran
    # SLA-miss margins the simulator predicted for configs the engine then ran within the SLA: each is a
    # measured error of the simulator (its latency was off by at least that much), so it widens the error
    surprises: list[float] = field(default_factory=list)

    def observe(self, predicted: float | None, measured: float | None, order: int | None = None,
                miss: float | None = None) -> None:
        """Learn from one real trial; only pairs where both sides ran and are positive carry a ratio.
        `miss`: the simulator's predicted SLA violation ((value - limit) / limit) when it said the config
        would miss the SLA; if the engine met it, that margin is a surprise that widens the error."""
        if predicted and measured and predicted > 0 and measured > 0:
            self.ratios.append(measured / predicted)
            if order is not None:
                self.pairs.append((predicted, measured, order))
        elif predicted is None and measured is not None and measured > 0:
            self.surprises.append(miss if miss is not None and miss > 0 else self.prior_error)

    def correction(self) -> float:
        return statistics.median(self.ratios) if self.ratios else 1.0

    def error(self) -> float:
        if len(self.ratios) < self.min_points:
            base = self.prior_error
        else:
            c = self.correction()
            base = max(self.floor, max(abs(r / c - 1) for r in self.ratios))
        return max([base, *self.surprises])

    def bounds(self, predicted: float | None) -> tuple[float | None, float | None]:
        """(corrected prediction, its upper bound)."""
        if predicted is None:
            return None, None
        corrected = predicted * self.correction()
        return corrected, corrected * (1 + self.error())

    def twin(self, predicted: float | None) -> tuple[float, float, int] | None:
        """The measured (predicted, measured, trial) the simulator cannot tell this prediction from."""
        if predicted is None:
            return None
        return next((t for t in self.pairs if abs(predicted - t[0]) <= self.twin_tol * t[0]), None)

    def score(self, predicted: float | None, incumbent: float | None,
              miss: float | None = None) -> tuple[float | None, float | None, bool, str]:
        """(corrected, upper bound, could beat the incumbent, why) for one candidate now."""
        twin = self.twin(predicted)
        if twin is None:
            corrected, upper = self.bounds(predicted)
            return (corrected, upper, *self.could_beat(predicted, incumbent, miss))
        _, m, o = twin
        ok = incumbent is None or m > incumbent  # the measured one stands for both
        return m, m, ok, (f"simulator twin of real trial #{o} (predicted within {self.twin_tol:.0%}, measured "
                          f"{m:.1f}): upper bound {m:.1f} {'>' if ok else '<='} incumbent "
                          f"{incumbent if incumbent is None else round(incumbent, 1)}")

    def could_beat(self, predicted: float | None, incumbent: float | None,
                   miss: float | None = None) -> tuple[bool, str]:
        corrected, upper = self.bounds(predicted)
        if upper is None:
            if self.surprises and miss is not None and miss <= self.error():
                return True, (f"simulator predicts an SLA miss by {miss:.0%}, within its measured error "
                              f"{self.error():.0%} (the engine met the SLA in {len(self.surprises)} config(s) it "
                              "said would miss)")
            return False, "simulator: cannot meet the SLA or start"
        if incumbent is None:
            return True, f"no incumbent yet; corrected prediction {corrected:.1f}"
        if upper > incumbent:
            return True, f"upper bound {upper:.1f} (corrected {corrected:.1f} +{self.error():.0%}) > incumbent {incumbent:.1f}"
        return False, f"upper bound {upper:.1f} (corrected {corrected:.1f} +{self.error():.0%}) <= incumbent {incumbent:.1f}"


def gated_search(candidates: Sequence[Candidate], measure: Callable[[Any], tuple[float | None, float | None]],
                 *, gate: SimGate | None = None, max_real: int | None = None,
                 first: Any = None, twin_tol: float = 0.01) -> list[Record]:
    """Launch real trials (via `measure(key) -> (objective, capacity)`, None objective = did not meet the
    SLA) best upper bound first, re-scoring after each, until no remaining candidate could beat the
    incumbent or `max_real` trials ran. `first` (e.g. the baseline's key) is launched first regardless."""
    gate = gate or SimGate(twin_tol=twin_tol)
    records: list[Record] = []
    remaining = list(candidates)
    incumbent: float | None = None

    def score(c: Candidate) -> tuple[float | None, float | None, bool, str]:
        return gate.score(c.predicted, incumbent)

    n = 0
    while remaining and (max_real is None or n < max_real):
        pick = next((c for c in remaining if first is not None and c.key == first), None)
        if pick is None:
            pick = max(remaining, key=lambda c: score(c)[1] or float("-inf"))
            corrected, upper, ok, reason = score(pick)
            if not ok:
                break
        else:
            corrected, upper, _, _ = score(pick)
            reason = "baseline: launched first"
        remaining.remove(pick)
        measured, measured_cap = measure(pick.key)
        n += 1
        records.append(Record(pick.key, pick.predicted, pick.predicted_capacity, corrected, upper, incumbent, True,
                              reason, measured, measured_cap, order=n))
        gate.observe(pick.predicted, measured, order=n)
        if measured is not None and (incumbent is None or measured > incumbent):
            incumbent = measured
    for c in remaining:
        corrected, upper, ok, reason = score(c)
        if ok:
            reason = f"budget of {max_real} real trials spent"
        elif c.predicted is None and c.why_none:
            reason = f"simulator: {c.why_none[:200]}"
        records.append(Record(c.key, c.predicted, c.predicted_capacity, corrected, upper, incumbent, False, reason))
    return records


def real_trials_to(records: Sequence[Record], target: float) -> int | None:
    """Real trials launched until the best measured objective first reached `target` (None: never)."""
    best = float("-inf")
    for r in sorted((r for r in records if r.launched), key=lambda r: r.order or 0):
        if r.measured is not None:
            best = max(best, r.measured)
        if best >= target:
            return r.order
    return None
