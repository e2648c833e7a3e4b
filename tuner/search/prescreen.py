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
from tuner.spec.sla import max_violation
from tuner.spec.study import Study

Result = dict[str, Any]


def simulate(study: Study, flavour: str, args: dict[str, Any], *, seed: int | None = None,
             on_point: Callable[[Any], None] | None = None) -> Result:
    """One config on the simulator: {"outcome", "objective", "violations", "latency", "capacity", "points"}."""
    from tuner.load.capacity import find_capacity
    from tuner.load.target import VirtualTarget
    from tuner.search.fidelity import StopTrial
    from tuner.sim import SimulatedEngine, shape_for

    try:
        sim = SimulatedEngine(
            flavour=flavour, gpu=study.sim.gpu, shape=study.model.shape or shape_for(study.model.name),
            args=args, max_model_len=study.model.max_model_len,
            tensor_parallel_size=study.model.tensor_parallel_size, dtype=study.model.dtype,
        )
    except EngineStartError as exc:
        return {"outcome": exc.outcome, "reason": exc.reason, "objective": None, "points": 0}
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
        return {"outcome": "ok", "objective": s.get(metric), "latency": s.get(lat), "capacity": cap.capacity,
                "violations": [t.violation(s) for t in study.sla], "points": len(cap.points),
                "load_points": cap.points}
    low = min(cap.points, key=lambda p: p.load).summary if cap.points else {}
    return {"outcome": "sla_violated", "objective": low.get(metric), "latency": low.get(lat), "capacity": None,
            "violations": [t.violation(low) for t in study.sla], "points": len(cap.points),
            "load_points": cap.points, "reason": f"SLA not met at the lowest load (violation {max_violation(study.sla, low):.2f})"}


def stopped_result(study: Study, reason: str, seen: list[Any]) -> Result:
    """A rung-stopped trial: its best SLA-feasible point is a true lower bound of its objective."""
    feasible = [p for p in seen if p.feasible]
    if not feasible:
        low = min(seen, key=lambda p: p.load).summary
        return {"outcome": "sla_violated", "objective": low.get(study.objective.metric),
                "latency": low.get(study.objective.latency_metric), "capacity": None,
                "violations": [t.violation(low) for t in study.sla], "points": len(seen), "reason": reason}
    best = max(feasible, key=lambda p: p.load)
    s = best.summary
    return {"outcome": "ok", "objective": s.get(study.objective.metric),
            "latency": s.get(study.objective.latency_metric), "capacity": best.load,
            "violations": [t.violation(s) for t in study.sla], "points": len(seen), "early_stopped": True,
            "reason": reason}


def prescreen(study: Study, trials: int = 40, top_k: int = 3) -> list[tuple[str, dict[str, Any]]]:
    """Best `top_k` (engine, params) of a simulated study of `trials` trials for a real-engine study."""
    from tuner.search.searcher import SearchCore
    from tuner.search.space import build_space

    space = build_space(study)
    core = SearchCore(study, space)
    for _ in range(trials):
        cfg = core.ask()
        if cfg is None:
            break
        flavour = space.engines[cfg["engine"]].flavour
        core.tell(cfg["number"], simulate(study, flavour, cfg["args"]))
    ranked = sorted((h for h in core.history if h["feasible"] and not h["baseline"]),
                    key=lambda h: -h["objective"])
    return [(h["engine"], dict(h["params"])) for h in ranked[:top_k]]
