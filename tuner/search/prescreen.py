"""Cheap evaluations on the simulated engine: the search benchmark's oracle and the real studies' pre-screen.

`simulate` runs one config through the simulator in virtual time (start checks, then the same
capacity search a trial runs) and returns the result dict the trainable reports, so the searcher
cannot tell it from a real trial. `prescreen` runs a short simulated study with the same searcher for
a real-engine study and returns the best configs it found, which the real search launches first
(after the baseline): GPU time goes to candidates that already did well on the calibrated model.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tuner.common.errors import EngineStartError
from tuner.search.ask_tell import TrialReport
from tuner.spec.sla import max_violation
from tuner.spec.study import Study
from tuner.trial.outcome import TrialOutcome


def simulate(study: Study, flavour: str, args: dict[str, Any], *, seed: int | None = None,
             on_point: Callable[[Any], None] | None = None, calibration: Any = None) -> TrialReport:
    """One config on the simulator, reported as a trial would be (with its load points).

    `calibration` (a tuner.sim.cost.Calibration) replaces the fitted one: benchmarks/sim_in_loop.py
    plays a deliberately miscalibrated "real engine" this way."""
    from tuner.load.capacity import find_capacity
    from tuner.load.target import VirtualTarget
    from tuner.sim import SimulatedEngine, shape_for
    from tuner.sim.host import host_calibration
    from tuner.trial.fidelity import StopTrial

    try:
        sim = SimulatedEngine(
            flavour=flavour, gpu=study.sim.gpu, shape=study.model.shape or shape_for(study.model.name),
            args=args, max_model_len=study.model.max_model_len,
            tensor_parallel_size=study.model.tensor_parallel_size, dtype=study.model.dtype,
            speculative={k: v.model_dump() for k, v in study.speculative.methods.items()},
            calibration=calibration if calibration is not None else host_calibration(study.sim.host_factors),
        )
    except EngineStartError as exc:
        return TrialReport.failed(exc.outcome, exc.reason)
    seen: list[Any] = []

    def hook(point: Any) -> None:
        seen.append(point)
        if on_point is not None:
            on_point(point)

    try:
        cap = find_capacity(VirtualTarget(sim), study.workload, study.sla, study.capacity,
                            seed=study.seed if seed is None else seed,
                            max_model_len=study.model.max_model_len, on_point=hook)
    except StopTrial as stop:
        return stopped_result(study, stop.reason, seen)
    metric, lat = study.objective.metric, study.objective.latency_metric
    if cap.best is not None and cap.capacity is not None:
        s = cap.best.summary
        return TrialReport(TrialOutcome.OK, objective=s.get(metric), latency=s.get(lat), capacity=cap.capacity,
                           violations=[t.violation(s) for t in study.sla], metrics=dict(s), points=len(cap.points),
                           load_points=list(cap.points))
    low = min(cap.points, key=lambda p: p.load).summary if cap.points else {}
    return TrialReport(TrialOutcome.SLA_VIOLATED, objective=low.get(metric), latency=low.get(lat),
                       violations=[t.violation(low) for t in study.sla], metrics=dict(low), points=len(cap.points),
                       load_points=list(cap.points),
                       reason=f"SLA not met at the lowest load (violation {max_violation(study.sla, low):.2f})")


def stopped_result(study: Study, reason: str, seen: list[Any]) -> TrialReport:
    """A rung-stopped trial: its best SLA-feasible point is a true lower bound of its objective."""
    feasible = [p for p in seen if p.feasible]
    metric, lat = study.objective.metric, study.objective.latency_metric
    if not feasible:
        low = min(seen, key=lambda p: p.load).summary
        return TrialReport(TrialOutcome.SLA_VIOLATED, objective=low.get(metric), latency=low.get(lat),
                           violations=[t.violation(low) for t in study.sla], metrics=dict(low), points=len(seen),
                           reason=reason)
    best = max(feasible, key=lambda p: p.load)
    s = best.summary
    return TrialReport(TrialOutcome.OK, objective=s.get(metric), latency=s.get(lat), capacity=best.load,
                       violations=[t.violation(s) for t in study.sla], metrics=dict(s), points=len(seen),
                       early_stopped=True, reason=reason)


class SimulatedSearch:
    """The study's own search (sampler, baseline, constraints, seed) on the simulator, continued on demand."""

    def __init__(self, study: Study, space: Any) -> None:
        from tuner.search.searcher import SearchCore

        self.study, self.space, self.core = study, space, SearchCore(study, space)
        self.calibration: Any = None  # a tuner.sim.cost.Calibration in place of the study's (the gate's host fit)
        self.trials = 0
        self.ended = False  # the search has nothing left to propose

    def run(self, trials: int) -> list[tuple[dict[str, Any], TrialReport]]:
        """`trials` more simulated trials: each finished trial's history row (engine, params, args,
        baseline, objective, ...) and report."""
        out: list[tuple[dict[str, Any], TrialReport]] = []
        for _ in range(trials):
            cfg = self.core.ask()
            if cfg is None:
                self.ended = True
                break
            report = simulate(self.study, self.space.engines[cfg.engine].flavour, cfg.args,
                              calibration=self.calibration)
            self.core.tell(cfg.number, report)
            out.append((self.core.history[-1], report))
        self.trials += len(out)
        return out


def simulated_search(study: Study, space: Any, trials: int) -> list[tuple[dict[str, Any], TrialReport]]:
    """`trials` trials of the study's search on the simulator (see SimulatedSearch)."""
    return SimulatedSearch(study, space).run(trials)


def prescreen(study: Study, trials: int = 40, top_k: int = 3) -> list[tuple[str, dict[str, Any]]]:
    """Best `top_k` (engine, params) of a simulated study of `trials` trials for a real-engine study."""
    from tuner.search.space import build_space

    rows = [h for h, _ in simulated_search(study, build_space(study), trials)]
    ranked = sorted((h for h in rows if h["feasible"] and not h["baseline"]), key=lambda h: -h["objective"])
    return [(h["engine"], dict(h["params"])) for h in ranked[:top_k]]


def warm_configs(study: Study) -> list[tuple[str, dict[str, Any]]]:
    """With `search.prescreen` on a study of a real engine, the configs to launch first; else none."""
    from tuner.engines import engine_class

    if study.search.prescreen and any(not engine_class(e).simulated for e in study.engine_names):
        return prescreen(study)
    return []
