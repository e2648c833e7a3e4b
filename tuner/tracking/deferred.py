"""Deferred MLflow logging: a study's records kept in its output folder, logged to MLflow later.

For a GPU host whose tracking server is out of reach during the study (`tracking.mode: deferred`,
`--tracking deferred`): trials go to trials.parquet as they finish (as always) and what the parent run
needs (the redacted study file, search space, knob names, SLA, final figures and status) to
`tracking.json`. `log_folder` then logs the folder with the same StudyTracker calls as live mode (a
parent run, one child per trial, the same redaction), at the end of the study or later from any host
(`python -m tuner.run --log-only <output>`). It is idempotent: the parent is found again by the
folder's id tag, trials that already have a finished child run are skipped, and a child left
half-written by an earlier attempt is replaced.
"""

from __future__ import annotations

import json
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuner.common.atomic import write_json
from tuner.common.redact import redact_yaml_text
from tuner.tracking.mlflow_log import KIND_TAG, STUDY_TAG, StudyTracker
from tuner.trial.table import read_trials, write_trials

RECORD = "tracking.json"
STATE = "state.json"
FOLDER_TAG = "servetune.folder_id"  # ties the parent run to one output folder (found again, never duplicated)
LOGGED_TAG = "servetune.study_logged"


@dataclass
class Logged:
    parent_run_id: str
    new_trials: int
    already: int


def read_record(out: Path) -> dict[str, Any]:
    path = out / RECORD
    return json.loads(path.read_text()) if path.exists() else {}


def update_record(out: Path, **fields: Any) -> None:
    write_json(out / RECORD, {**read_record(out), **fields})


def start_record(out: Path, *, study_file: Path, study_name: str, experiment: str, space: list[str],
                 params: dict[str, Any], param_names: list[str], defaults: dict[str, Any], sla: list[str]) -> None:
    """What the parent run gets, saved at the start of a deferred study (the study file redacted)."""
    if read_record(out).get("folder_id"):
        return  # a resumed study keeps its record (and so its parent run)
    write_json(out / RECORD, {
        "folder_id": uuid.uuid4().hex, "study_name": study_name, "experiment": experiment,
        "study_file": study_file.name, "study_yaml": redact_yaml_text(study_file.read_text()), "space": space,
        "params": params, "param_names": param_names, "defaults": defaults, "sla": sla, "status": "RUNNING",
    })


def log_folder(out: Path, uri: str) -> Logged:
    """Log a deferred study's folder to MLflow (parent, trials, outputs, status); safe to run again."""
    from tuner.spec.sla import parse_sla

    rec = read_record(out)
    if not rec.get("folder_id"):
        from tuner.common.errors import SpecError

        raise SpecError(f"{out} has no {RECORD} (not a study run with deferred tracking)", "--log-only",
                        "give the output folder of a study run with --tracking deferred")
    tracker = StudyTracker(uri, rec["experiment"], rec["study_name"], out / "mlartifacts",
                           sla=parse_sla(rec["sla"]) if rec["sla"] else [])
    parent = _find_parent(tracker, rec["folder_id"])
    if parent is None:
        parent = tracker.start(tags={FOLDER_TAG: rec["folder_id"]})
    else:
        tracker.parent_run_id = parent
    _save_parent(out, parent)
    if tracker.client.get_run(parent).data.tags.get(LOGGED_TAG) != "true":
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp) / rec["study_file"]
            copy.write_text(rec["study_yaml"])
            tracker.log_study(copy, rec["space"], rec["params"])
        tracker.client.set_tag(parent, LOGGED_TAG, "true")
    trials = read_trials(out / "trials.parquet")
    logged, partial = tracker.logged_trials(), tracker.partial_trials()
    new = 0
    for t in sorted(trials, key=lambda t: t.number):
        if t.trial_id in logged:
            t.mlflow_run_id = logged[t.trial_id]
            continue
        if t.trial_id in partial:
            tracker.client.delete_run(partial[t.trial_id])
        t.mlflow_run_id = tracker.log_trial(t, rec["param_names"], rec["defaults"])
        new += 1
    if trials:
        write_trials(out / "trials.parquet", trials)
    files = [out / name for name in rec.get("outputs", [])] + sorted((out / "plots").glob("*.html"))
    tracker.log_outputs([f for f in files if f.exists()], rec.get("summary", {}))
    status = rec.get("status", "RUNNING")
    tracker.finish(status if status in ("FINISHED", "FAILED", "KILLED") else "KILLED")
    return Logged(parent_run_id=parent, new_trials=new, already=len(trials) - new)


def _find_parent(tracker: StudyTracker, folder_id: str) -> str | None:
    runs = tracker.client.search_runs(
        [tracker.experiment_id], max_results=10,
        filter_string=f"tags.`{FOLDER_TAG}` = '{folder_id}' and tags.`{KIND_TAG}` = 'study' "
                      f"and tags.`{STUDY_TAG}` = '{tracker.study_name}'")
    return runs[0].info.run_id if runs else None


def _save_parent(out: Path, parent: str) -> None:
    path = out / STATE
    state = json.loads(path.read_text()) if path.exists() else {}
    if state.get("parent_run_id") != parent:
        write_json(path, {**state, "parent_run_id": parent})
