"""Choosing the config to promote: SLA-feasible Pareto candidates, confirmed by re-runs, worst case wins.

Following SCOOT, each candidate is re-run with other workload seeds (other arrival orders and
lengths) and judged by its worst run, so a lucky trial cannot win. A candidate that misses its SLA
or fails in any confirmation run is dropped, never promoted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from tuner.promote.pareto import objective_value, pareto_front
from tuner.spec.sla import max_violation, meets
from tuner.spec.study import Study
from tuner.trial.result import TrialResult

Confirm = Callable[[TrialResult, int], TrialResult]


@dataclass
class Candidate:
    """One Pareto candidate and what its confirmation runs said."""

    trial: TrialResult
    runs: list[TrialResult] = field(default_factory=list)  # confirmation re-runs, in order
    dropped: str = ""  # why it was dropped; empty while still in the race

    @property
    def objectives(self) -> list[float]:
        return [o for o in (self.trial.objective, *(r.objective for r in self.runs)) if o is not None]

    @property
    def worst_objective(self) -> float | None:
        return min(self.objectives) if self.objectives else None

    @property
    def worst_capacity(self) -> float | None:
        caps = [c for c in (self.trial.capacity, *(r.capacity for r in self.runs)) if c is not None]
        return min(caps) if caps else None


@dataclass
class Selection:
    winner: Candidate | None
    candidates: list[Candidate]
    reason: str


def confirmation_seeds(study: Study, runs: int) -> list[int]:
    """Seeds for confirmation runs: the same for every candidate (a fair comparison), never the study's."""
    return [(study.seed + 1_000_003 * (i + 1)) % (2**31 - 1) for i in range(runs)]


def feasible_trials(study: Study, trials: list[TrialResult]) -> list[TrialResult]:
    """Trials that ran OK and whose metrics at capacity meet every SLA term."""
    return [t for t in trials if t.feasible and meets(study.sla, t.metrics)]


def _run_ok(study: Study, run: TrialResult) -> str:
    """Empty string when a confirmation run passed, else why it failed."""
    if not run.feasible:
        return f"outcome {run.outcome.value}" + (f": {run.reason}" if run.reason else "")
    if not meets(study.sla, run.metrics):
        broken = [str(t) for t in study.sla if t.violation(run.metrics) > 0]
        return f"SLA violated ({', '.join(broken)})"
    return ""


def _nothing_reason(study: Study, trials: list[TrialResult]) -> str:
    if not trials:
        return "no trials finished"
    counts = Counter(t.outcome.value for t in trials)
    outcomes = ", ".join(f"{n} {k}" for k, n in counts.most_common())
    ok = [t for t in trials if t.feasible]
    if not ok:
        return f"no trial met the SLA at any load ({outcomes})"
    worst = min(ok, key=lambda t: max_violation(study.sla, t.metrics))
    return (
        f"{len(ok)} trial(s) reported ok but their metrics at capacity violate the SLA "
        f"({', '.join(str(s) for s in study.sla)}), e.g. trial {worst.trial_id}; outcomes: {outcomes}"
    )


def select(study: Study, trials: list[TrialResult], confirm: Confirm | None) -> Selection:
    """Pick the candidate with the best worst-case objective over its original and confirmation runs."""
    feasible = feasible_trials(study, trials)
    if not feasible:
        return Selection(None, [], "nothing promoted: " + _nothing_reason(study, trials))
    front = pareto_front(feasible, study.objective.metric, study.objective.latency_metric)
    candidates = [Candidate(t) for t in front[: study.promotion.top_k]]
    runs = study.promotion.confirm_runs if confirm is not None else 0
    for cand in candidates:
        for seed in confirmation_seeds(study, runs):
            try:
                run = confirm(cand.trial, seed)  # type: ignore[misc]  # runs > 0 only with confirm
            except Exception as exc:  # noqa: BLE001 -- a confirmation that raises is a failed confirmation
                cand.dropped = f"confirmation with seed {seed} raised {type(exc).__name__}: {exc}"
                break
            cand.runs.append(run)
            why = _run_ok(study, run)
            if why:
                cand.dropped = f"confirmation with seed {seed} failed: {why}"
                break
    alive = [c for c in candidates if not c.dropped and c.worst_objective is not None]
    if not alive:
        lines = "; ".join(f"trial {c.trial.trial_id}: {c.dropped or 'no objective'}" for c in candidates)
        return Selection(None, candidates, f"nothing promoted: every candidate failed confirmation ({lines})")
    latency = study.objective.latency_metric
    best = max(alive, key=lambda c: (c.worst_objective, -(c.trial.latency(latency) or 0.0)))
    obj = study.objective.metric
    how = (
        f"worst of {1 + len(best.runs)} runs" if best.runs
        else "not confirmed (no confirmation runs)"
    )
    reason = (
        f"trial {best.trial.trial_id} ({best.trial.engine}): {obj} {best.worst_objective:.4g} ({how}); "
        f"best of {len(alive)} confirmed candidate(s) among {len(front)} SLA-feasible Pareto trial(s)"
        f" of {len(feasible)} feasible"
    )
    original = objective_value(best.trial, obj)
    if original is not None and best.runs and best.worst_objective is not None:
        reason += f"; original run {original:.4g}"
    return Selection(best, candidates, reason)
