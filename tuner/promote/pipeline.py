"""promote_study: from a finished study's trials to a registered, deployable config.

Selection (tuner.promote.select) -> a promotion run nested under the study run -> registered model
version ``<study>-config`` with lineage tags -> promoted.yaml (Serve config) -> alias ``staging``.
When nothing qualifies, the promotion run still records why.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlflow import MlflowClient
from mlflow.entities import Metric, Param

from tuner.promote.registry import ARTIFACT_DIR, STAGING, ConfigRegistry, model_name
from tuner.promote.select import Candidate, Confirm, select
from tuner.promote.serve_config import app_args, app_config, hardware, serve_config, write_config
from tuner.spec.study import Study
from tuner.tracking.compare import knob_params, rounded, trial_metrics
from tuner.trial.result import TrialResult

PROMOTED_FILE = "promoted.yaml"
SUMMARY_FILE = "promotion.json"


@dataclass
class PromotionResult:
    promoted: bool
    reason: str  # why this one, or why nothing was promoted
    trial: TrialResult | None  # the winner (its original trial)
    confirmations: list[TrialResult]  # the winner's re-runs
    worst_objective: float | None  # selection uses the worst run (SCOOT)
    model_name: str | None  # "<study>-config"
    model_version: str | None
    serve_config: Path | None  # output_dir / "promoted.yaml"
    run_id: str | None = None  # the promotion run in MLflow
    candidates: list[dict[str, Any]] = field(default_factory=list)  # every candidate and its fate
    defaults_won: bool = False  # no tuned config beat the confirmed defaults by more than the noise
    baseline_worst_objective: float | None = None  # the defaults' confirmed worst case (same seeds)
    noise: float | None = None  # relative run-to-run spread measured in the confirmations
    gain: float | None = None  # worst_objective / baseline_worst_objective: the figure every output quotes
    alias: str | None = None  # the registered model alias moved to this version
    spec_schedule: dict[str, Any] | None = None  # per-batch-size speculative tokens: chosen or why not
    trial_ids: list[str] = field(default_factory=list)  # the study's trials this promotion chose from
    settings: str = ""  # the study's promotion block it ran under (promotion.json; a resume compares it)
    reused: bool = False  # read back from promotion.json by a resume that found nothing new to promote


def promote_study(
    study: Study,
    trials: list[TrialResult],
    *,
    output_dir: Path,
    tracking_uri: str,
    parent_run_id: str | None,
    confirm: Confirm | None,
    set_alias: bool = True,
    extra_tags: dict[str, str] | None = None,
) -> PromotionResult:
    """Select, confirm, register and write the Serve config of a study's winner (see module doc)."""
    selection = select(study, trials, confirm)
    summary = [_candidate_json(c) for c in selection.candidates]
    if selection.baseline is not None and selection.baseline not in selection.candidates:
        summary.append(_candidate_json(selection.baseline))
    figures: dict[str, Any] = {"defaults_won": selection.defaults_won, "noise": selection.noise, "gain": selection.gain,
               "baseline_worst_objective": selection.baseline.worst_objective
               if selection.baseline is not None and not selection.baseline.dropped else None}
    basis: dict[str, Any] = {"trial_ids": sorted(t.trial_id for t in trials), "settings": promotion_settings(study)}
    client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
    run = client.create_run(
        _experiment_id(client, study, parent_run_id),
        run_name="promotion",
        tags={
            "servetune.kind": "promotion",
            "servetune.study": study.name,
            **({"mlflow.parentRunId": parent_run_id} if parent_run_id else {}),
        },
    )
    run_id = run.info.run_id
    try:
        if selection.winner is None:
            client.set_tag(run_id, "servetune.promoted", "false")
            client.set_tag(run_id, "servetune.defaults_won", str(selection.defaults_won).lower())
            client.log_param(run_id, "reason", selection.reason[:6000])
            result = PromotionResult(False, selection.reason, None, [], None, None, None, None, run_id, summary,
                                     **figures, **basis)
            _write_summary(output_dir, result)
            client.set_terminated(run_id)
            return result
        result = _register(client, study, selection.winner, selection.reason, summary, output_dir=output_dir,
                           tracking_uri=tracking_uri, parent_run_id=parent_run_id, run_id=run_id,
                           set_alias=set_alias, figures={**figures, **basis}, extra_tags=extra_tags or {},
                           trials=trials)
        client.set_terminated(run_id)
        return result
    except BaseException:
        client.set_terminated(run_id, status="FAILED")
        raise


def _register(client: MlflowClient, study: Study, winner: Candidate, reason: str,
              summary: list[dict[str, Any]], *, output_dir: Path, tracking_uri: str,
              parent_run_id: str | None, run_id: str, set_alias: bool, figures: dict[str, Any],
              extra_tags: dict[str, str], trials: list[TrialResult]) -> PromotionResult:
    from dataclasses import replace

    from tuner.engines import get_engine
    from tuner.promote.spec_schedule import choose

    trial = winner.trial
    schedule = choose(trial, trials, get_engine(trial.engine).flavour(study))
    if schedule.entries is not None:
        reason = f"{reason}; {schedule.reason}"
    name = model_name(study.name)
    capacity = winner.worst_capacity
    tags = {**_lineage_tags(study, winner, parent_run_id, run_id), **extra_tags}
    _log_params(client, run_id, study, winner, figures)
    registry = ConfigRegistry(tracking_uri)
    # A tracking server requires the version's run to hold its source; the trial run is linked by tags.
    version = registry.register(name, source_run_id=run_id, run_id=run_id, tags=tags, description=reason)
    lineage = {"model_name": name, "model_version": version, "study": study.name, "trial_id": trial.trial_id}
    if parent_run_id:
        lineage["study_run_id"] = parent_run_id
    if trial.mlflow_run_id:
        lineage["trial_run_id"] = trial.mlflow_run_id
    if schedule.entries is not None:
        lineage["spec_schedule"] = json.dumps(schedule.entries)
        client.set_tag(run_id, "servetune.spec_schedule", json.dumps(schedule.entries))
    # the promoted engine args carry the schedule; the trial itself stays as measured (fixed K)
    args = app_args(study, replace(trial, args=schedule.apply(trial.args)), capacity=capacity, lineage=lineage)
    app = app_config(args, name=study.promotion.app_name, route_prefix=study.promotion.route_prefix)
    path = write_config(serve_config([app]), output_dir / PROMOTED_FILE)
    result = PromotionResult(True, reason, trial, list(winner.runs), winner.worst_objective, name, version,
                             path, run_id, summary, **figures, alias=STAGING if set_alias else None,
                             spec_schedule={"entries": schedule.entries, "reason": schedule.reason,
                                            "bands": schedule.bands})
    summary_path = _write_summary(output_dir, result)
    with tempfile.TemporaryDirectory() as tmp:
        staged = Path(tmp) / ARTIFACT_DIR
        staged.mkdir()
        for src in (path, summary_path):
            (staged / src.name).write_bytes(src.read_bytes())
        client.log_artifacts(run_id, str(staged), ARTIFACT_DIR)
    if set_alias:
        registry.move_staging(name, version)
    return result


def _experiment_id(client: MlflowClient, study: Study, parent_run_id: str | None) -> str:
    if parent_run_id:
        return client.get_run(parent_run_id).info.experiment_id
    name = study.tracking.experiment or study.name
    exp = client.get_experiment_by_name(name)
    return exp.experiment_id if exp is not None else client.create_experiment(name)


def _lineage_tags(study: Study, winner: Candidate, parent_run_id: str | None, run_id: str) -> dict[str, str]:
    trial = winner.trial
    tags = {
        "servetune.study": study.name,
        "servetune.promotion_run_id": run_id,
        "servetune.trial_id": trial.trial_id,
        "servetune.engine": trial.engine,
        "servetune.args": json.dumps(trial.args, sort_keys=True, default=str),
        "servetune.model": study.model.name,
        "servetune.sla": ", ".join(str(t) for t in study.sla),
        "servetune.workload": json.dumps(study.workload.model_dump(mode="json", exclude_defaults=True)),
        "servetune.capacity": f"{winner.worst_capacity}",
        "servetune.capacity_mode": study.capacity.mode,
        "servetune.objective_metric": study.objective.metric,
        "servetune.worst_objective": f"{winner.worst_objective}",
        "servetune.confirm_runs": str(len(winner.runs)),
        "servetune.hardware": hardware(study, trial),
    }
    if parent_run_id:
        tags["servetune.study_run_id"] = parent_run_id
    if trial.mlflow_run_id:
        tags["servetune.trial_run_id"] = trial.mlflow_run_id
    return tags


def _log_params(client: MlflowClient, run_id: str, study: Study, winner: Candidate, figures: dict[str, Any]) -> None:
    trial = winner.trial
    # Knobs under their engine argument names, as on the trial runs (one naming in the compare view).
    params: dict[str, Any] = {k: json.dumps(v) if isinstance(v, (dict, list)) else v
                              for k, v in knob_params(trial.args).items()}
    params.update({
        "engine": trial.engine, "trial_id": trial.trial_id, "model": study.model.name,
        "sla": ", ".join(str(t) for t in study.sla), "hardware": hardware(study, trial),
        "capacity_mode": study.capacity.mode,
        "workload": json.dumps(study.workload.model_dump(mode="json", exclude_defaults=True))[:6000],
    })
    metrics = {"sla_capacity": winner.worst_capacity, "objective": winner.worst_objective,
               "worst_objective": winner.worst_objective, "original_objective": trial.objective}
    metrics.update({k: v for k, v in trial_metrics(trial).items() if k not in ("objective", "sla_capacity")})
    metrics.update({f"confirm_{i}_objective": r.objective for i, r in enumerate(winner.runs)})
    metrics.update({k: figures[k] for k in ("baseline_worst_objective", "noise", "gain")})
    batch_params = [Param(k, str(v)[:6000]) for k, v in params.items()]
    batch_metrics = [Metric(k, r, 0, 0) for k, v in metrics.items() if (r := rounded(v)) is not None]
    client.log_batch(run_id, params=batch_params, metrics=batch_metrics)
    client.set_tag(run_id, "servetune.promoted", "true")
    client.set_tag(run_id, "servetune.defaults_won", str(figures["defaults_won"]).lower())


def _candidate_json(c: Candidate) -> dict[str, Any]:
    return {
        "trial_id": c.trial.trial_id, "engine": c.trial.engine, "args": c.trial.args,
        "objective": c.trial.objective, "worst_objective": c.worst_objective,
        "capacity": c.trial.capacity, "worst_capacity": c.worst_capacity,
        "confirmations": [{"seed": r.seed, "outcome": r.outcome.value, "objective": r.objective,
                           "capacity": r.capacity, "reason": r.reason} for r in c.runs],
        "dropped": c.dropped, "baseline": c.trial.baseline,
    }


def _write_summary(output_dir: Path, result: PromotionResult) -> Path:
    data = {
        "promoted": result.promoted, "reason": result.reason,
        "trial_id": result.trial.trial_id if result.trial else None,
        "worst_objective": result.worst_objective, "model_name": result.model_name,
        "model_version": result.model_version, "alias": result.alias, "run_id": result.run_id,
        "defaults_won": result.defaults_won, "baseline_worst_objective": result.baseline_worst_objective,
        "noise": result.noise, "gain": result.gain,
        "serve_config": str(result.serve_config) if result.serve_config else None,
        "candidates": result.candidates,
        "spec_schedule": result.spec_schedule,
        "trial_ids": result.trial_ids, "settings": result.settings,
    }
    output_dir.mkdir(parents=True, exist_ok=True)
    path = output_dir / SUMMARY_FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str))
    os.replace(tmp, path)
    return path


def promotion_settings(study: Study) -> str:
    """The promotion block as the selection read it: a resume re-promotes only when it changed."""
    return json.dumps(study.promotion.model_dump(mode="json"), sort_keys=True)


def previous_promotion(study: Study, trials: list[TrialResult], output_dir: Path,
                       tracking_uri: str) -> PromotionResult | None:
    """The promotion an earlier run of this study finished over exactly these trials under the same promotion
    settings, read back from promotion.json (None otherwise). A resume that ran no new trial uses it instead of
    re-running every confirmation and registering the same config as a new version."""
    try:
        data = json.loads((output_dir / SUMMARY_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("trial_ids") != sorted(t.trial_id for t in trials) \
            or data.get("settings") != promotion_settings(study) or not data.get("run_id"):
        return None
    try:  # the promotion run ends FINISHED only once registry, promoted.yaml and alias are done
        if MlflowClient(tracking_uri=tracking_uri).get_run(data["run_id"]).info.status != "FINISHED":
            return None
    except Exception:  # noqa: BLE001 - not in this store, or MLflow down: promote again
        return None
    path = output_dir / PROMOTED_FILE
    if data.get("promoted") and not path.exists():
        return None
    trial = next((t for t in trials if t.trial_id == data.get("trial_id")), None)
    return PromotionResult(
        bool(data.get("promoted")), str(data.get("reason", "")), trial, [], data.get("worst_objective"),
        data.get("model_name"), data.get("model_version"), path if data.get("promoted") else None, data["run_id"],
        data.get("candidates") or [], bool(data.get("defaults_won")), data.get("baseline_worst_objective"),
        data.get("noise"), data.get("gain"), data.get("alias"), data.get("spec_schedule"),
        data["trial_ids"], data["settings"], reused=True)

