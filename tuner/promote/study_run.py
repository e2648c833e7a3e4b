"""A finished study read back from its MLflow parent run: the study file and every trial.

The pipeline logs ``trials.parquet`` and the study file (``study.yaml`` or the file's own name) as
artifacts of the parent run; child runs carry the tag ``servetune.trial_id``.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

from tuner.common.atomic import read_table
from tuner.common.errors import SpecError
from tuner.spec.load import load_study
from tuner.spec.study import Study
from tuner.trial.result import TrialResult

TRIAL_TAG = "servetune.trial_id"
NOT_STUDY_FILES = {"promoted.yaml"}


def load_study_run(client: MlflowClient, run_id: str) -> tuple[Study, list[TrialResult]]:
    """(study, trials) of a finished study run; SpecError when the run is not one."""
    try:
        run = client.get_run(run_id)
    except MlflowException as exc:
        raise SpecError(f"no MLflow run {run_id!r} ({exc.message})", "--study-run",
                        "give the study's parent run id (printed at the end of python -m tuner.run)") from None
    names = {a.path for a in client.list_artifacts(run_id)}
    if "trials.parquet" not in names:
        raise SpecError(f"run {run_id} has no trials.parquet artifact (kind: "
                        f"{run.data.tags.get('servetune.kind', 'unknown')})", "--study-run",
                        "give the parent run of a finished study, not a trial run")
    study_file = "study.yaml" if "study.yaml" in names else next(
        (n for n in sorted(names) if n.endswith((".yaml", ".yml")) and n not in NOT_STUDY_FILES), None)
    if study_file is None:
        raise SpecError(f"run {run_id} has no study file artifact", "--study-run",
                        "re-run the study with python -m tuner.run, which logs it")
    tmp = Path(tempfile.mkdtemp(prefix="servetune-study-run-"))
    study = load_study(Path(client.download_artifacts(run_id, study_file, str(tmp))))
    rows = read_table(Path(client.download_artifacts(run_id, "trials.parquet", str(tmp)))).to_pylist()
    trials = [TrialResult.from_row(r) for r in rows]
    return study, _with_run_ids(client, run.info.experiment_id, run_id, trials)


def _with_run_ids(client: MlflowClient, experiment_id: str, parent: str,
                  trials: list[TrialResult]) -> list[TrialResult]:
    """Fill each trial's mlflow_run_id from the child runs when trials.parquet lacks it."""
    if all(t.mlflow_run_id for t in trials):
        return trials
    children = client.search_runs([experiment_id], f"tags.mlflow.parentRunId = '{parent}'", max_results=5000)
    by_trial = {r.data.tags[TRIAL_TAG]: r.info.run_id for r in children if TRIAL_TAG in r.data.tags}
    return [t if t.mlflow_run_id else replace(t, mlflow_run_id=by_trial.get(t.trial_id)) for t in trials]
