"""Canary: the study's SLA re-checked on a short load against the app Serve now runs.

A trial measured the engine on its own; the deployed app adds the Serve proxy, the replica's
routing and the promoted deployment options. So before `staging` moves, servetune's own load
generator (tuner.load) sends the study's workload shape to the app's route at a load at or below
the confirmed SLA capacity (`promotion.canary.load_fraction` of it by default) for a short time,
and the same SLA terms (plus the default error budget) decide. Early stop ends a hopeless canary
as soon as its verdict is known.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from tuner.common.errors import SpecError
from tuner.load.capacity import measure_point
from tuner.load.target import HttpTarget
from tuner.spec.study import Study

# the figures a canary reports (printed, in promotion.json and on MLflow); the SLA's own terms are added
FIGURES = ("request_throughput", "output_throughput", "error_rate", "completed", "failed",
           "p50_ttft_ms", "p99_ttft_ms", "p50_tpot_ms", "p99_tpot_ms", "p99_itl_ms", "p99_e2el_ms")


@dataclass(frozen=True)
class CanaryPlan:
    """How hard and how long: `load` is req/s (rate mode) or concurrent streams (concurrency mode)."""

    load: float
    seconds: float
    mode: str  # the study's capacity mode
    capacity: float | None  # the confirmed SLA capacity the load is derived from

    def describe(self) -> str:
        unit = "req/s" if self.mode == "rate" else "concurrent streams"
        of = f" ({self.load / self.capacity:.0%} of the confirmed SLA capacity {self.capacity:.4g})" \
            if self.capacity else ""
        return f"{self.load:.4g} {unit} for {self.seconds:g}s{of}"


@dataclass
class CanaryResult:
    passed: bool
    reason: str  # the verdict in words, with the binding figures
    plan: CanaryPlan
    summary: dict[str, float] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)  # each SLA term missed, with value and limit
    stopped_early: str | None = None
    sla_keys: tuple[str, ...] = ()  # the study's SLA terms, reported beside FIGURES

    def figures(self) -> dict[str, float]:
        keys = list(FIGURES) + [k for k in self.sla_keys if k not in FIGURES]
        return {k: float(self.summary[k]) for k in keys if k in self.summary
                and not math.isnan(float(self.summary[k]))}

    def to_json(self) -> dict[str, Any]:
        return {"passed": self.passed, "reason": self.reason, "load": self.plan.load, "mode": self.plan.mode,
                "seconds": self.plan.seconds, "capacity": self.plan.capacity, "violations": self.violations,
                "stopped_early": self.stopped_early, "figures": self.figures()}


def plan(study: Study, capacity: float | None, *, seconds: float | None = None,
         load: float | None = None) -> CanaryPlan:
    """The canary's load: `load` if given (never above the confirmed capacity), else the study's
    `promotion.canary.load_fraction` of that capacity. SpecError (exit 2) when it cannot be planned."""
    settings = study.promotion.canary
    mode = study.capacity.mode
    secs = settings.seconds if seconds is None else seconds
    if secs <= 0:
        raise SpecError(f"canary duration must be > 0 s, got {secs:g}", "--canary-seconds", "give e.g. 30")
    if load is not None:
        if load <= 0:
            raise SpecError(f"canary load must be > 0, got {load:g}", "--canary-rate", "give e.g. 1.5")
        if capacity is not None and load > capacity * (1 + 1e-9):
            raise SpecError(f"canary load {load:g} is above the confirmed SLA capacity {capacity:g}", "--canary-rate",
                            f"give a load at or below {capacity:g} (or leave it out: "
                            f"{settings.load_fraction:g} x capacity)")
        return CanaryPlan(_norm(load, mode), secs, mode, capacity)
    if capacity is None or not capacity > 0:
        raise SpecError("the promoted version records no SLA capacity to derive the canary load from",
                        "--canary-rate", "give the canary load explicitly, or --no-canary")
    return CanaryPlan(_norm(capacity * settings.load_fraction, mode), secs, mode, capacity)


def _norm(load: float, mode: str) -> float:
    return float(max(1, math.floor(load))) if mode == "concurrency" else float(load)


def run_canary(study: Study, http_base: str, route_prefix: str, model: str, canary: CanaryPlan) -> CanaryResult:
    """Send the canary through the Serve proxy to the app on `route_prefix` and judge it by the SLA."""
    base = http_base.rstrip("/") + route_prefix.rstrip("/")
    target = HttpTarget(base, model, prompt_mode=study.workload.prompt, tokenizer=study.model.tokenizer,
                        timeout_s=study.capacity.request_timeout_s, scrape_metrics=False)
    settings = study.capacity.model_copy(update={"duration_s": canary.seconds, "mode": canary.mode})
    try:
        point, _records = measure_point(target, study.workload, study.sla, settings, canary.load, seed=study.seed,
                                        max_model_len=study.model.max_model_len)
    except Exception as exc:  # noqa: BLE001 -- a canary that breaks is a failed canary, said in words
        return failed_canary(f"canary at {canary.describe()} could not run: {type(exc).__name__}: {exc}", canary)
    summary = point.summary
    missed = [f"{t.name} = {_fmt(summary.get(t.name))} > {t.limit:g}" for t in study.sla if t.violation(summary) > 0]
    if not any(t.name == "error_rate" for t in study.sla) and point.violation > 0 and \
            summary.get("error_rate", 0.0) > 0:
        from tuner.load.capacity import ERROR_BUDGET

        if summary.get("error_rate", 0.0) > ERROR_BUDGET:
            missed.append(f"error_rate = {summary['error_rate']:.3f} > {ERROR_BUDGET:g} (default error budget)")
    if point.stopped_early:
        missed.insert(0, f"stopped early: {point.stopped_early}")
    passed = point.feasible
    sla = ", ".join(str(t) for t in study.sla)
    figures = (f"{_fmt(summary.get('completed'), 0)} completed, {_fmt(summary.get('failed'), 0)} failed, "
               f"p99 TTFT {_fmt(summary.get('p99_ttft_ms'))} ms, p99 TPOT {_fmt(summary.get('p99_tpot_ms'))} ms, "
               f"{_fmt(summary.get('request_throughput'))} req/s")
    if passed:
        reason = f"canary passed at {canary.describe()}: {figures}; SLA {sla} held"
    else:
        why = "; ".join(missed) or f"violation {point.violation:.3g}"
        errors = sorted({r.error[:80] for r in _records if r.error and not r.warmup
                         and not r.error.startswith("cancelled")})[:3]
        err = f"; errors: {' | '.join(errors)}" if errors else ""
        reason = f"canary missed the SLA at {canary.describe()}: {why}; {figures}{err}"
    return CanaryResult(passed, reason, canary, dict(summary), missed, point.stopped_early,
                        tuple(t.name for t in study.sla))


def failed_canary(reason: str, canary: CanaryPlan | None = None) -> CanaryResult:
    """A canary that could not measure anything (the app refused the connection, the client broke)."""
    return CanaryResult(False, reason, canary or CanaryPlan(0.0, 0.0, "rate", None))


def _fmt(value: float | None, digits: int = 1) -> str:
    if value is None or value != value:
        return "n/a"
    return f"{value:,.{digits}f}"
