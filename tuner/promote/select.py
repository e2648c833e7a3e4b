"""Choosing the config to promote: SLA-feasible Pareto candidates, confirmed by re-runs, worst case wins.

Following SCOOT, each candidate is re-run with other workload seeds (other arrival orders and
lengths) and judged by its worst run, so a lucky trial cannot win. A candidate that misses its SLA
or fails in any confirmation run is dropped, never promoted.

The baseline (engine defaults) is confirmed the same way, with the same seeds. A tuned candidate wins
only when its confirmed worst case beats the baseline's confirmed worst case by more than the
run-to-run noise measured in those confirmations; otherwise the defaults win and the study says so,
promoting the defaults (or nothing, `promotion.when_defaults_win: nothing`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from tuner.spec.sla import max_violation, meets
from tuner.spec.study import Study
from tuner.trial.pareto import objective_value, pareto_front
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
    baseline: Candidate | None = None  # the defaults, confirmed like every candidate (None: not SLA-feasible)
    noise: float | None = None  # relative run-to-run spread measured in the confirmations (None: no re-runs)
    defaults_won: bool = False

    @property
    def gain(self) -> float | None:
        """Winner's confirmed worst case over the baseline's: the one figure report and promotion quote."""
        if self.winner is None or self.baseline is None or self.baseline.dropped:
            return None
        w, b = self.winner.worst_objective, self.baseline.worst_objective
        return w / b if w is not None and b else None


def run_noise(candidates: list[Candidate]) -> float | None:
    """The largest relative spread (max - min) / max of one config's objective over its runs."""
    spreads = [(max(c.objectives) - min(c.objectives)) / max(c.objectives)
               for c in candidates if c.runs and not c.dropped and len(c.objectives) > 1 and max(c.objectives) > 0]
    return max(spreads) if spreads else None


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
        return f"no trial met the SLA at any load ({outcomes})" + _closest_miss(study, trials)
    worst = min(ok, key=lambda t: max_violation(study.sla, t.metrics))
    return (
        f"{len(ok)} trial(s) reported ok but their metrics at capacity violate the SLA "
        f"({', '.join(str(s) for s in study.sla)}), e.g. trial {worst.trial_id}; outcomes: {outcomes}"
    )


def _closest_miss(study: Study, trials: list[TrialResult]) -> str:
    """The trial that came nearest to the SLA and what it measured: what the user has to relax (or fix)."""
    measured = [t for t in trials if t.outcome.value == "sla_violated" and t.metrics]
    if not measured:
        return ""
    near = min(measured, key=lambda t: max_violation(study.sla, t.metrics))
    missed = [f"{term.metric} {near.metrics[term.metric]:.4g} > {term.limit:g}" for term in study.sla
              if term.violation(near.metrics) > 0 and term.metric in near.metrics]
    unit = "req/s" if study.capacity.mode == "rate" else "concurrent"
    return (f"; closest: trial {near.trial_id}{' (engine defaults)' if near.baseline else ''} at the lowest "
            f"load, {study.capacity.low:g} {unit}: " + (", ".join(missed) if missed else near.reason)
            + "; relax those SLA terms (or lower capacity.low) to get a feasible config")


def _versus_defaults(study: Study, trials: list[TrialResult], feasible: list[TrialResult], front: list[TrialResult],
                     candidates: list[Candidate]) -> str:
    """Why no tuned config stood against the defaults: none ran, none met the SLA, the defaults dominate
    every one on the Pareto front, top_k left them out, or every tuned candidate failed its confirmation."""
    tuned = [t for t in feasible if not t.baseline]
    if not any(not t.baseline for t in trials):
        return "the study ran no tuned trial (the baseline only)"
    if not tuned:
        return "no tuned trial met the SLA"
    if not any(not t.baseline for t in front):
        return (f"the defaults dominate all {len(tuned)} SLA-feasible tuned trial(s) (more "
                f"{study.objective.metric} at lower {study.objective.latency_metric}), so none was a candidate")
    dropped = [c for c in candidates if not c.trial.baseline]
    if not dropped:
        return (f"the tuned trials on the Pareto front rank below the defaults and promotion.top_k "
                f"{study.promotion.top_k} left them out")
    why = "; ".join(f"trial {c.trial.trial_id}: {c.dropped or 'no objective'}" for c in dropped)
    return f"no tuned candidate survived confirmation ({why})"


def _confirm(study: Study, cand: Candidate, confirm: Confirm | None, runs: int) -> None:
    for seed in confirmation_seeds(study, runs):
        try:
            run = confirm(cand.trial, seed)  # type: ignore[misc]  # runs > 0 only with confirm
        except Exception as exc:  # noqa: BLE001 -- a confirmation that raises is a failed confirmation
            cand.dropped = f"confirmation with seed {seed} raised {type(exc).__name__}: {exc}"
            return
        cand.runs.append(run)
        why = _run_ok(study, run)
        if why:
            cand.dropped = f"confirmation with seed {seed} failed: {why}"
            return


def select(study: Study, trials: list[TrialResult], confirm: Confirm | None) -> Selection:
    """Pick the candidate with the best worst-case objective over its original and confirmation runs,
    and keep it only if it beats the equally confirmed defaults by more than the run-to-run noise."""
    feasible = feasible_trials(study, trials)
    if not feasible:
        return Selection(None, [], "nothing promoted: " + _nothing_reason(study, trials))
    obj, latency = study.objective.metric, study.objective.latency_metric
    front = pareto_front(feasible, obj, latency)
    candidates = [Candidate(t) for t in front[: study.promotion.top_k]]
    base_trial = next((t for t in feasible if t.baseline), None)
    base = next((c for c in candidates if c.trial.baseline), None)
    if base is None and base_trial is not None:
        base = Candidate(base_trial)
    runs = study.promotion.confirm_runs if confirm is not None else 0
    for cand in [*candidates, *([base] if base is not None and base not in candidates else [])]:
        _confirm(study, cand, confirm, runs)
    noise = run_noise([*candidates, *([base] if base is not None and base not in candidates else [])])
    tuned = [c for c in candidates if not c.dropped and c.worst_objective is not None and not c.trial.baseline]
    best = max(tuned, key=lambda c: (c.worst_objective, -(c.trial.latency(latency) or 0.0))) if tuned else None
    how = f"worst of {1 + runs} runs, same seeds for every config" if runs else "not confirmed (no confirmation runs)"
    noise_txt = f"run-to-run noise {100 * noise:.1f}%" if noise is not None else "run-to-run noise not measured"
    bar = base.worst_objective if base is not None and not base.dropped else None
    best_worst = best.worst_objective if best is not None else None
    if base is not None and bar is not None and (best_worst is None or best_worst <= bar * (1 + (noise or 0.0))):
        versus = (_versus_defaults(study, trials, feasible, front, candidates) if best is None or best_worst is None else
                  f"the best tuned candidate, trial {best.trial.trial_id}, reached {best_worst:.4g} "
                  f"({best_worst / bar:.3f}x), not more than {noise_txt} above them")
        keep = study.promotion.when_defaults_win == "promote_defaults"
        reason = (f"the engine defaults win: baseline trial {base.trial.trial_id} {obj} {bar:.4g} ({how}); {versus}; "
                  + ("promoting the defaults" if keep else "nothing promoted (promotion.when_defaults_win: nothing)"))
        return Selection(base if keep else None, candidates, reason, base, noise, defaults_won=True)
    if best is None or best_worst is None:
        lines = "; ".join(f"trial {c.trial.trial_id}: {c.dropped or 'no objective'}" for c in candidates)
        return Selection(None, candidates, f"nothing promoted: every candidate failed confirmation ({lines})",
                         base, noise)
    reason = (
        f"trial {best.trial.trial_id} ({best.trial.engine}): {obj} {best_worst:.4g} ({how}); "
        f"best of {len(tuned)} confirmed candidate(s) among {len(front)} SLA-feasible Pareto trial(s)"
        f" of {len(feasible)} feasible"
    )
    original = objective_value(best.trial, obj)
    if original is not None and best.runs:
        reason += f"; original run {original:.4g}"
    if bar:
        reason += f"; {best_worst / bar:.3f}x the defaults' confirmed {bar:.4g}, above {noise_txt}"
    elif base is not None:
        reason += f"; the defaults failed confirmation ({base.dropped})"
    else:
        reason += "; the defaults did not meet the SLA"
    return Selection(best, candidates, reason, base, noise)
