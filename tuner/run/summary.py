"""What the user reads on stdout: the plan of a dry run and the summary of a finished study."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tuner.common.prog import prog
from tuner.common.redact import redact_text
from tuner.search.space import Space
from tuner.spec.study import Study
from tuner.trial.result import TrialResult


def print_plan(study: Study, space: Space, out: Path, uri: str) -> None:
    from tuner.run.resources import trial_resources

    print(f"study {study.name}: dry run (nothing started)")
    print(f"  engines: {', '.join(study.engine_names)}"
          + (f" (simulated {study.sim.flavour} on {study.sim.gpu}, {study.sim.mode} time)" if "sim" in study.engine_names else ""))
    print(f"  model: {study.model.name} max_model_len={study.model.max_model_len} tp={study.model.tensor_parallel_size}")
    wl = study.workload
    source = (wl.profile or (f"trace {wl.trace.path} ({wl.trace.format})" if wl.trace else None)
              or (f"dataset {wl.dataset.path}" if wl.dataset else f"{len(wl.classes or [])} classes"))
    print(f"  workload: {source}"
          f", arrivals {wl.arrivals.process}, {study.capacity.requests_per_point} requests per load point")
    print(f"  SLA: {', '.join(str(t) for t in study.sla)}")
    print(f"  output-changing levers allowed: {', '.join(study.allow) or 'none (outputs stay as the baseline)'}"
          + (f"; speculative methods: {', '.join(study.speculative.methods)}" if study.speculative.methods else ""))
    print(f"  objective: maximise {study.objective.metric} at SLA capacity ({study.objective.mode}); "
          f"search {study.search.algorithm}, baseline first: {study.search.baseline_first}")
    print(f"  budget: {study.budget.trials} trials, {study.budget.max_concurrent} at once"
          + (f", {study.budget.time_limit_s:g} s limit" if study.budget.time_limit_s else ""))
    for e in study.engine_names:
        res = trial_resources(study, e, 0)  # a dry run starts no executor: the request as written
        print(f"  resources per {e} trial: {res['cpu']:g} CPU, {res['gpu']:g} GPU")
    print("  search space:")
    for line in space.describe():
        print(f"    {line}")
    print(f"  output: {out}")
    print(f"  MLflow: {redact_text(uri)}")


def ratio(value: float | None, base: float | None) -> str:
    if value is None or not base:
        return "n/a"
    return f"{value / base:.2f}x"


def print_summary(study: Study, trials: list[TrialResult], out: Path, uri: str, promotion: Any,
                  rejected: list[dict[str, Any]], wall_s: float, *, parent_run_id: str | None = None,
                  mlflow_view: str | None = None) -> None:
    from collections import Counter

    counts = Counter(t.outcome.value for t in trials)
    base = next((t for t in trials if t.baseline), None)
    feasible = sorted((t for t in trials if t.feasible), key=lambda t: -(t.objective or 0))
    print(f"\nstudy {study.name}: {len(trials)} trials in {wall_s:.0f} s "
          f"({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}; {len(rejected)} configs rejected before launch)")
    metric = study.objective.metric
    if base is not None:
        print(f"  baseline (engine defaults): {metric} = {_fmt(base.objective)} at capacity "
              f"{_fmt(base.capacity)} [{base.outcome.value}]")
    if feasible:
        best = feasible[0]
        print(f"  best SLA-feasible: trial {best.number} {metric} = {_fmt(best.objective)} "
              f"({ratio(best.objective, base.objective if base else None)} of baseline), capacity {_fmt(best.capacity)}")
        print(f"    args: {best.args}")
    else:
        print("  no config met the SLA")
    if promotion is not None:
        reason = promotion.reason.removeprefix("nothing promoted: ")
        again = " (by the earlier run, over the same trials: nothing re-run)" if getattr(promotion, "reused", False) else ""
        print(f"  promotion{again}: {'promoted' if promotion.promoted else 'nothing promoted'}: {reason}")
        if promotion.gain is not None:
            print(f"    gain over the defaults: {promotion.gain:.3f}x (confirmed worst cases, same seeds)")
        if promotion.model_version:
            alias = f", alias {promotion.alias} -> version {promotion.model_version}" if promotion.alias else ""
            print(f"  registered model: {promotion.model_name} version {promotion.model_version}{alias}")
    if parent_run_id:
        print(f"  MLflow parent run: {parent_run_id}")
        if promotion is None and feasible:  # with nothing feasible there is nothing to promote later
            found = out.parent.resolve() == Path("runs").resolve()  # where tuner.promote looks by default
            print(f"    promote later: {prog('promote')} --study-run {parent_run_id}"
                  + ("" if found else f" --mlflow-uri {redact_text(uri)}"))
    print(f"  results: {out}")
    for name in ("trials.parquet", "pareto.json", "promoted.yaml", "report.html"):
        if (out / name).exists():
            print(f"    {out / name}")
    if uri.startswith("sqlite:///"):
        page = f"/{mlflow_view}" if mlflow_view else ""
        print(f"  MLflow UI: mlflow ui --backend-store-uri {uri} --port 5000  (then open http://127.0.0.1:5000{page})")
    else:
        print(f"  MLflow: {redact_text(uri)}")


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:,.1f}"
