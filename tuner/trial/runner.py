"""One trial: start the engine with one config, find its SLA capacity under load, always stop it.

Runs inside a Ray actor (tuner.run.ray_executor), a local worker process (tuner.trial.worker, for the
local executor) or directly (benchmarks). Every
way a trial can end is mapped to a TrialOutcome with a one-line reason; nothing here raises for an
engine failure.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuner.common.errors import EngineStartError, SpecError
from tuner.spec import levers
from tuner.spec.sla import max_violation
from tuner.spec.study import Study
from tuner.trial.outcome import TrialOutcome
from tuner.trial.result import TrialResult

log = logging.getLogger(__name__)


@dataclass
class TrialPlan:
    """What to run: the engine, its arguments, and where to put the trial's files."""

    trial_id: str
    number: int
    engine: str
    args: dict[str, Any]
    params: dict[str, Any] = field(default_factory=dict)
    baseline: bool = False
    seed: int = 0
    notes: list[str] = field(default_factory=list)
    incumbent: float | None = None  # best SLA-feasible objective so far: hopeless configs stop early
    incumbent_capacity: float | None = None


def trial_dir(output_dir: Path, number: int, trial_id: str) -> Path:
    """Where one trial's files go (engine log, requests.parquet, plots)."""
    return output_dir / "trials" / f"{number:03d}-{trial_id}"


def run_trial(study: Study, plan: TrialPlan, trial_dir: Path, *, base_dir: Path | None = None) -> TrialResult:
    """Run one trial end to end and return its result (never raises for an engine failure)."""
    trial_dir.mkdir(parents=True, exist_ok=True)
    result = TrialResult(
        trial_id=plan.trial_id, number=plan.number, engine=plan.engine, params=plan.params, args=plan.args,
        outcome=TrialOutcome.START_FAILED, baseline=plan.baseline, seed=plan.seed, notes=list(plan.notes),
        output_check=levers.output_check(study, plan.args), gpus=assigned_gpus(), started_at=time.time(),
    )
    t0 = time.monotonic()
    from tuner.engines import get_engine

    try:
        if get_engine(plan.engine).runs_virtual(study):
            _run_virtual(study, plan, trial_dir, result, base_dir)
        else:
            _run_server(study, plan, trial_dir, result, base_dir)
    except EngineStartError as exc:
        result.outcome, result.reason = exc.outcome, exc.reason
    except SpecError:
        raise
    except Exception as exc:
        log.exception("trial %s failed", plan.trial_id)
        result.outcome, result.reason = TrialOutcome.CRASHED, f"{type(exc).__name__}: {exc}"
    result.wall_s = time.monotonic() - t0
    result.ended_at = time.time()
    result.notes += [n for n in plan.notes if n not in result.notes]  # e.g. a rung stop during the search
    return result


def _capacity(study: Study, target: Any, plan: TrialPlan, base_dir: Path | None) -> Any:
    """The capacity search, with the multi-fidelity rung stop when an incumbent exists (not for the baseline)."""
    from tuner.load.capacity import CapacityResult, find_capacity
    from tuner.trial.fidelity import StopTrial, rung_stop

    seen: list[Any] = []
    hook = None
    if plan.incumbent is not None and not plan.baseline:
        rung = rung_stop(study, plan.incumbent, plan.incumbent_capacity)

        def hook(point: Any) -> None:
            seen.append(point)
            rung(point)

    try:
        return find_capacity(
            target, study.workload, study.sla, study.capacity, seed=plan.seed,
            max_model_len=study.model.max_model_len, base_dir=base_dir, on_point=hook,
        )
    except StopTrial as stop:
        # Its best SLA-feasible point is a true lower bound; it cannot beat the incumbent, so stop paying.
        plan.notes.append(f"rung-stopped after {len(seen)} load points: {stop.reason}")
        feasible = [p for p in seen if p.feasible]
        best = max(feasible, key=lambda p: p.load) if feasible else None
        return CapacityResult(capacity=best.load if best else None, best=best, points=seen, records=[])


def _run_virtual(study: Study, plan: TrialPlan, trial_dir: Path, result: TrialResult, base_dir: Path | None) -> None:
    from tuner.load.target import VirtualTarget
    from tuner.sim import SimulatedEngine, shape_for
    from tuner.sim.host import host_calibration

    sim = SimulatedEngine(
        flavour=study.sim.flavour, gpu=study.sim.gpu, shape=study.model.shape or shape_for(study.model.name),
        args=plan.args, max_model_len=study.model.max_model_len,
        tensor_parallel_size=study.model.tensor_parallel_size, dtype=study.model.dtype,
        speculative={k: v.model_dump() for k, v in study.speculative.methods.items()},
        calibration=host_calibration(study.sim.host_factors),
    )
    result.resolved = dict(sim.resolved)
    result.start_s = 0.0
    cap = _capacity(study, VirtualTarget(sim), plan, base_dir)
    _finish(study, cap, result, trial_dir, server_failure=None)


def _run_server(study: Study, plan: TrialPlan, trial_dir: Path, result: TrialResult, base_dir: Path | None) -> None:
    from tuner.engines import get_engine
    from tuner.engines.base import LaunchSpec
    from tuner.engines.process import reserve_port
    from tuner.load.target import HttpTarget

    engine = get_engine(plan.engine)
    settings = engine.run_settings(study)
    host = getattr(settings, "host", "127.0.0.1")
    port, sock = reserve_port(host)
    log_path = trial_dir / "engine.log"
    result.log_path = str(log_path)
    launch = LaunchSpec(model=study.model, host=host, port=port, log_path=log_path, settings=settings,
                        gpu_ids=assigned_gpus())
    with engine.server(plan.args, launch, port_socket=sock) as srv:
        result.start_s = srv.start_seconds
        try:
            result.resolved = engine.resolved_config(srv.base_url)
        except Exception as exc:  # noqa: BLE001 - resolved config is informative only
            result.notes.append(f"could not read resolved config: {exc}")
        target = HttpTarget(
            srv.base_url, study.model.client_name, prompt_mode=study.workload.prompt,
            tokenizer=study.model.tokenizer, timeout_s=study.capacity.request_timeout_s,
            metrics_prefix=engine.metrics_prefix, metric_names=engine.metric_names_for(launch),
            time_scale=float(getattr(settings, "time_scale", 1.0)),  # the sim's server face runs this much faster
        )
        cap = _capacity(study, target, plan, base_dir)
        _finish(study, cap, result, trial_dir, server_failure=srv.failure())


GPUS_ENV = "SERVETUNE_TRIAL_GPUS"  # the local executor's assignment (it also sets CUDA_VISIBLE_DEVICES)


def assigned_gpus() -> list[int]:
    """The GPUs this trial holds: Ray's assignment inside a Ray worker, else the local executor's."""
    if "ray" in sys.modules:  # never import Ray here: the local executor runs where Ray is not installed
        try:
            import ray

            if ray.is_initialized():
                return [int(g) for g in ray.get_gpu_ids()]
        except Exception:  # noqa: BLE001 - a driver-side call (no worker context): no assigned GPUs
            pass
    return [int(g) for g in os.environ.get(GPUS_ENV, "").split(",") if g.strip()]


def _finish(study: Study, cap: Any, result: TrialResult, trial_dir: Path,
            server_failure: tuple[TrialOutcome, str] | None) -> None:
    """Map a capacity search (and the server's fate) to the trial's outcome and metrics."""
    from tuner.load.records_io import RecordWriter

    result.points = [
        {"load": p.load, "feasible": p.feasible, "violation": p.violation, "stopped_early": p.stopped_early,
         **p.summary}
        for p in cap.points
    ]
    if cap.records:
        path = trial_dir / "requests.parquet"
        with RecordWriter(path) as w:
            for r in cap.records:
                w.write(r)
        result.records_path = str(path)
    point = cap.best or (cap.points[0] if cap.points else None)
    result.metrics = dict(point.summary) if point else {}
    from tuner.trial.binding import describe

    result.binding = describe(study.sla, result.points, cap.capacity if cap.best is not None else None,
                              study.capacity.mode)
    from tuner.load.ruler import warning

    if warn := warning(result.metrics):
        result.notes.append(warn)
    if server_failure is not None:
        result.outcome, result.reason = server_failure
        result.capacity = result.objective = None
        return
    if cap.best is not None and cap.capacity is not None:
        result.outcome = TrialOutcome.OK
        result.capacity = cap.capacity
        result.objective = cap.best.summary.get(study.objective.metric)
        if study.objective.per_gpu and result.objective is not None:
            result.objective /= levers.gpus(result.args, study.model.tensor_parallel_size)
        result.reason = f"SLA met up to {cap.capacity:.3g} {'req/s' if study.capacity.mode == 'rate' else 'concurrent'}"
        return
    summary = result.metrics
    errors = [r.error for r in cap.records if r.error and not r.warmup]
    # a hung engine: requests time out without a single token (a stalled stream has some)
    timeouts = [r for r in cap.records if r.error and r.error.startswith("timeout") and not r.token_times
                and not r.warmup]
    err_rate = summary.get("error_rate", 0.0) if summary else 1.0
    if summary and summary.get("completed", 0) == 0 and err_rate >= 1.0:
        result.outcome = TrialOutcome.TIMEOUT
        result.reason = (f"engine hung: no request completed at the lowest load (error_rate = {err_rate:.2f}, "
                         f"{len(timeouts)} timed out)")
        return
    if errors and len(timeouts) * 2 >= len(errors) and _error_bound(study, summary):
        result.outcome = TrialOutcome.TIMEOUT
        result.reason = (f"engine hung under load: {len(timeouts)} requests timed out with no tokens "
                         f"(error_rate = {err_rate:.2f})")
        return
    result.outcome = TrialOutcome.SLA_VIOLATED
    if errors and _error_bound(study, summary):
        common = max(set(errors), key=errors.count)
        result.reason = (f"SLA not met even at the lowest load {study.capacity.low:g}: error_rate = {err_rate:.2f} "
                         f"over the error budget (most common: {common[:120]!r})")
        return
    stopped = cap.points[0].stopped_early if cap.points else None
    if stopped:
        result.reason = f"SLA not met even at the lowest load {study.capacity.low:g}: load point stopped early ({stopped})"
        return
    worst = max(study.sla, key=lambda t: t.violation(summary)) if summary else study.sla[0]
    value = summary.get(worst.metric) if summary else None
    result.reason = (
        f"SLA not met even at the lowest load {study.capacity.low:g}: {worst.name} = "
        f"{value if value is None else round(value, 1)} > {worst.limit:g} (violation {max_violation(study.sla, summary):.2f})"
    )


def _error_bound(study: Study, summary: dict[str, float]) -> bool:
    """True when errors, not latency, are what broke the SLA at this point."""
    from tuner.load.capacity import point_violation

    return point_violation(study.sla, summary) > max(max_violation(study.sla, summary), 0.0)


def violations(study: Study, result: TrialResult) -> list[float]:
    """Per-term SLA violations at the trial's reported point ((value - limit) / limit, <= 0 feasible)."""
    return [t.violation(result.metrics) for t in study.sla]
