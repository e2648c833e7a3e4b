"""MLflow: one parent run per study, one child run per trial, consistent names across trials.

Only the driver talks to MLflow (trials return results to it), so a SQLite store is never written
by two processes and workers on other nodes need no access to the tracking store.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tuner.common.errors import SpecError
from tuner.common.numeric import finite_float
from tuner.common.redact import redact, redact_text, redact_yaml_text
from tuner.spec.sla import SLATerm
from tuner.tracking import compare, trial_plots
from tuner.tracking.credentials import strip_credentials
from tuner.tracking.server_check import check_server
from tuner.trial.result import TrialResult

log = logging.getLogger(__name__)

STUDY_TAG = "servetune.study"
TRIAL_TAG = "servetune.trial_id"
KIND_TAG = "servetune.kind"
# Beside tracking.compare's COMPARE_METRICS on every child run: the load generator's own error bar.
# The full summary of the capacity point is in each run's trial.json.
LOGGED_METRICS = ("client_error_ms", "client_suspect")


def default_uri(output_dir: Path) -> str:
    return f"sqlite:///{(output_dir / 'mlflow.db').resolve()}"


_SQL = ("postgresql", "mysql", "mssql", "oracle")
_URI_FIX = "use http(s)://host:port (an MLflow server), sqlite:///path/mlflow.db, or leave it out (SQLite in the output folder)"


def check_uri(uri: str, where: str = "--mlflow-uri", *, reach: bool = True) -> None:
    """Fail before any engine starts on a tracking URI MLflow cannot use or (`reach`) a server that does not
    answer; deferred tracking checks the URI's form only (its server may be out of reach until the end)."""
    try:
        shown = strip_credentials(uri)
    except ValueError as exc:  # urlsplit: an unclosed IPv6 bracket, a port out of range
        raise SpecError(f"malformed MLflow URI {redact_text(uri)} ({exc})", where,
                        "write http(s)://host:port with a port in 1..65535") from None
    scheme = uri.split(":", 1)[0].split("+", 1)[0].lower()
    if scheme.startswith("databricks"):
        raise SpecError(f"Databricks tracking ({shown}) is not supported by servetune", where, _URI_FIX)
    if scheme in ("http", "https"):
        if reach:
            check_server(uri, shown, where)
    elif scheme == "sqlite":
        if not uri.startswith("sqlite:///") or len(uri) <= len("sqlite:///"):
            raise SpecError(f"malformed SQLite URI {shown!r}", where, "write sqlite:///absolute/path/mlflow.db")
        folder = Path(uri.removeprefix("sqlite:///")).parent
        if not folder.is_dir():
            raise SpecError(f"the folder {folder} of the SQLite store does not exist", where,
                            "create it, or give a path in an existing folder")
    elif scheme in _SQL:
        try:
            from sqlalchemy.engine import make_url

            make_url(uri).get_dialect().import_dbapi()  # the driver module itself (psycopg2, MySQLdb...)
        except Exception as exc:  # noqa: BLE001 - SQLAlchemy: ArgumentError, NoSuchModuleError, ImportError
            raise SpecError(f"MLflow cannot open {shown}: {type(exc).__name__}: {str(exc)[:200]}", where,
                            f"install the {scheme} driver (e.g. pip install psycopg2-binary / pymysql), or "
                            + _URI_FIX.removeprefix("use ")) from None
    elif scheme == "file" or "://" not in uri:
        if os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").lower() != "true":
            raise SpecError(f"{shown} is a file store, which MLflow 3 refuses", where, _URI_FIX)
    else:
        raise SpecError(f"unsupported MLflow URI scheme in {shown}", where, _URI_FIX)


class StudyTracker:
    """Wraps MlflowClient with explicit run ids (no global active-run state)."""

    def __init__(self, uri: str, experiment: str, study_name: str, artifact_dir: Path | None = None,
                 sla: Sequence[SLATerm] = ()) -> None:
        import mlflow
        from mlflow.tracking import MlflowClient

        self.uri = uri
        mlflow.set_tracking_uri(uri)
        self.client = MlflowClient(tracking_uri=uri)
        exp = self.client.get_experiment_by_name(experiment)
        if exp is None:
            loc = artifact_dir.resolve().as_uri() if artifact_dir and uri.startswith("sqlite") else None
            self.experiment_id = self.client.create_experiment(experiment, artifact_location=loc)
        else:
            self.experiment_id = exp.experiment_id
        # MLflow 3 opens an untyped experiment on its GenAI overview; a study is an ML experiment (runs table).
        self.client.set_experiment_tag(self.experiment_id, compare.EXPERIMENT_KIND_TAG, compare.EXPERIMENT_KIND)
        self.sla = list(sla)
        self._view_saved = False
        self.study_name = study_name
        self.parent_run_id: str | None = None

    def start(self, resume_run_id: str | None = None, tags: dict[str, str] | None = None) -> str:
        if resume_run_id:
            self.parent_run_id = resume_run_id
            self.client.update_run(resume_run_id, status="RUNNING")
            return resume_run_id
        run = self.client.create_run(
            self.experiment_id, run_name=self.study_name,
            tags={STUDY_TAG: self.study_name, KIND_TAG: "study", **(tags or {})},
        )
        self.parent_run_id = run.info.run_id
        return self.parent_run_id

    def log_study(self, study_file: Path, space_lines: list[str], params: dict[str, Any]) -> None:
        assert self.parent_run_id
        with tempfile.TemporaryDirectory() as tmp:  # a redacted copy: env tokens and URI passwords stay out
            copy = Path(tmp) / study_file.name
            copy.write_text(redact_yaml_text(study_file.read_text()))
            self.client.log_artifact(self.parent_run_id, str(copy))
        for k, v in redact(params).items():
            self.client.log_param(self.parent_run_id, k, str(v)[:6000])
        self.client.log_text(self.parent_run_id, "\n".join(space_lines), "search_space.txt")

    def save_view(self, knobs: Sequence[str]) -> str:
        """Save the compare view (tracking.compare) on the experiment; returns its UI path."""
        state = compare.view_state(list(knobs), self.parent_run_id)
        self.client.set_experiment_tag(self.experiment_id, compare.VIEW_TAG, json.dumps(state))
        self._view_saved = True
        return self.view_path

    @property
    def view_path(self) -> str:
        return compare.view_path(self.experiment_id)

    def _trial_runs(self) -> list[Any]:
        assert self.parent_run_id
        return self.client.search_runs(
            [self.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{self.parent_run_id}'", max_results=5000,
        )

    def logged_trials(self) -> dict[str, str]:
        """trial_id -> child run id of each completely logged trial (a run still RUNNING was cut off
        half-written by an outage or a kill: see partial_trials)."""
        return {r.data.tags[TRIAL_TAG]: r.info.run_id for r in self._trial_runs()
                if TRIAL_TAG in r.data.tags and r.info.status != "RUNNING"}

    def partial_trials(self) -> dict[str, str]:
        """trial_id -> run id of trial runs left RUNNING (created, never finished)."""
        return {r.data.tags[TRIAL_TAG]: r.info.run_id for r in self._trial_runs()
                if TRIAL_TAG in r.data.tags and r.info.status == "RUNNING"}

    def log_trial(self, t: TrialResult, all_param_names: list[str], defaults: dict[str, Any]) -> str:
        """One child run per trial. Every trial logs the same param names (defaults filled) for compare views."""
        assert self.parent_run_id
        if not self._view_saved:
            self.save_view(all_param_names)
        binding = compare.binding_term(t, self.sla)
        run = self.client.create_run(
            self.experiment_id, run_name=f"trial-{t.number:03d}-{t.engine}",
            tags={
                "mlflow.parentRunId": self.parent_run_id, TRIAL_TAG: t.trial_id, KIND_TAG: "trial",
                STUDY_TAG: self.study_name, "servetune.outcome": t.outcome.value,
                "servetune.reason": redact_text(t.reason)[:5000], "servetune.baseline": str(t.baseline).lower(),
                "servetune.feasible": str(t.feasible).lower(),
                "servetune.binding_sla": binding or "none",
                "servetune.binding": t.binding[:5000] or "none",
                "servetune.output_labels": ",".join(t.labels) or "none",
                "servetune.output_check": t.output_check or "not recorded",
            },
        )
        rid = run.info.run_id
        from mlflow.entities import Metric, Param

        params = {**compare.knob_params(t.args, all_param_names, defaults), "engine": t.engine, "number": t.number,
                  "seed": t.seed, "outcome": t.outcome.value, "binding_sla": binding or "none"}
        params = redact(params)
        metrics: dict[str, Any] = {**compare.trial_metrics(t), "wall_s": compare.rounded(t.wall_s)}
        metrics.update({k: compare.rounded(t.metrics.get(k)) for k in LOGGED_METRICS})
        ts = 0
        self.client.log_batch(
            rid,
            metrics=[Metric(k, f, ts, 0) for k, v in metrics.items() if (f := finite_float(v)) is not None],
            params=[Param(k, json.dumps(v) if isinstance(v, (dict, list)) else str(v)) for k, v in params.items()],
        )
        trial_plots.log(self.client, rid, t, self.sla)
        self.client.log_dict(rid, redact(t.to_json()), "trial.json")
        if t.resolved:
            self.client.log_dict(rid, redact(t.resolved), "resolved_config.json")
        if t.records_path and Path(t.records_path).exists():
            self.client.log_artifact(rid, t.records_path)
        if t.log_path and Path(t.log_path).exists():
            with tempfile.TemporaryDirectory() as tmp:  # engine logs may echo tokens: upload a redacted copy
                copy = Path(tmp) / Path(t.log_path).name
                copy.write_text(redact_text(Path(t.log_path).read_text(errors="replace")))
                self.client.log_artifact(rid, str(copy))
        status = "FINISHED" if t.outcome.ran else "FAILED"
        self.client.set_terminated(rid, status=status)
        return rid

    def log_outputs(self, files: list[Path], summary: dict[str, Any]) -> None:
        assert self.parent_run_id
        for path in files:
            if path.exists():
                sub = "plots" if path.parent.name == "plots" else None
                self.client.log_artifact(self.parent_run_id, str(path), artifact_path=sub)
        for k, v in summary.items():
            if (f := finite_float(v)) is not None:
                self.client.log_metric(self.parent_run_id, k, f)

    def close_if_running(self, run_id: str) -> bool:
        """Mark a run left RUNNING by a killed driver as KILLED; True when it was."""
        try:
            if self.client.get_run(run_id).info.status != "RUNNING":
                return False
        except Exception:  # noqa: BLE001 - a run from another store or deleted: nothing to close
            return False
        self.client.set_terminated(run_id, status="KILLED")
        return True

    def finish(self, status: str | bool) -> None:
        """End the parent run: FINISHED, FAILED or KILLED (an interrupted study); a bool means FINISHED/FAILED."""
        if isinstance(status, bool):
            status = "FINISHED" if status else "FAILED"
        if self.parent_run_id:
            self.client.set_terminated(self.parent_run_id, status=status)
