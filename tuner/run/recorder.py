"""The driver's record of finished trials: trials.parquet first, then MLflow, then the progress line.

Executor-neutral: the Ray executor calls it from a Tune callback, the local executor directly. The order
is the study's guarantee: a trial is in trials.parquet before Optuna is told of it (`persist`), and
in MLflow only after that (`record`), so a driver stopped anywhere in between loses nothing finished
and `--resume` never runs a trial that MLflow already has. With deferred tracking (`live=False`) MLflow
is not called during the study; `replay` logs every trial at the end (or `--log-only` later).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from tuner.common.errors import DiskFullError
from tuner.search.signals import Interrupt
from tuner.search.space import Space
from tuner.spec.study import Study
from tuner.tracking.mlflow_log import StudyTracker
from tuner.trial.result import TrialResult
from tuner.trial.table import write_trials

log = logging.getLogger(__name__)


def param_names(space: Space) -> tuple[list[str], dict[str, Any]]:
    """Every knob name of the study's engines and their defaults (MLflow logs the same names for every trial)."""
    names: list[str] = []
    defaults: dict[str, Any] = {}
    for sp in space.engines.values():
        names += [n for n in sp.params if n not in names]
        defaults.update(sp.defaults())
    return names, defaults


class Recorder:
    """Finished trials of one study, as written to trials.parquet and logged to MLflow."""

    def __init__(self, study: Study, space: Space, out: Path, tracker: StudyTracker | None, progress: Any,
                 known: dict[str, TrialResult], logged: dict[str, str]) -> None:
        self.study, self.space, self.out, self.tracker, self.progress = study, space, out, tracker, progress
        self.trials = known
        self._finished: set[str] = set(known)  # recorded and logged (or left to reconcile on resume)
        self.logged = logged
        self.param_names, self.defaults = param_names(space)

    @property
    def live(self) -> bool:
        """False with deferred tracking: MLflow hears of the trials at the end of the study."""
        return self.tracker is not None

    def started(self, trial_id: str, engine: str, params: dict[str, Any]) -> None:
        self.progress.trial_started(trial_id, engine, params)

    def record(self, result: TrialResult) -> None:
        """trials.parquet first, then MLflow: a driver killed in between leaves a trial that resume
        logs to MLflow (`reconcile`), never an MLflow run for a trial that resume would run again."""
        if result.trial_id in self._finished or not self.persist(result):
            return
        result = self.trials[result.trial_id]
        self._finished.add(result.trial_id)
        self._log(result)
        self.progress.trial_finished(result)

    def persist(self, result: TrialResult) -> bool:
        """The trial in trials.parquet (once); False when it could not be written."""
        if result.trial_id in self.trials:
            return True
        if Interrupt.failure is not None:
            return False  # the search is ending on a fault; nothing more is written
        self.trials[result.trial_id] = result
        try:
            write_trials(self.out / "trials.parquet", list(self.trials.values()))
        except DiskFullError as exc:  # stop the search; the trials written before stay in trials.parquet
            del self.trials[result.trial_id]
            Interrupt.failure = exc
            logging.getLogger("ray.tune").setLevel(logging.CRITICAL)  # its own state writes fail the same way
            return False
        return True

    def _log(self, result: TrialResult) -> None:
        """Log one trial to MLflow. While MLflow is down the trial stays only in trials.parquet (no run id)
        and is retried with the next trial, at the end of the study, and by --resume."""
        if not self.live:
            return
        if result.trial_id in self.logged:
            result.mlflow_run_id = self.logged[result.trial_id]
            write_trials(self.out / "trials.parquet", list(self.trials.values()))
        else:
            self.replay()  # this trial and any left from an outage, oldest first

    def untracked(self) -> list[str]:
        """Finished trials that have no complete MLflow run yet."""
        return [t.trial_id for t in sorted(self.trials.values(), key=lambda t: t.number)
                if t.trial_id not in self.logged]

    def replay(self) -> bool:
        """Log the untracked trials (a run left half-written by an outage is deleted first); True when
        none is left."""
        if self.tracker is None:
            return not self.untracked()
        try:
            partial = self.tracker.partial_trials() if self.untracked() else {}
            for tid in self.untracked():
                if tid in partial:
                    self.tracker.client.delete_run(partial.pop(tid))
                t = self.trials[tid]
                t.mlflow_run_id = self.tracker.log_trial(t, self.param_names, self.defaults)
                self.logged[tid] = t.mlflow_run_id
                write_trials(self.out / "trials.parquet", list(self.trials.values()))
        except Exception as exc:  # noqa: BLE001 - tracking trouble must not lose a trial (it is in trials.parquet)
            log.warning("MLflow logging failed (%s); %d trial(s) kept in trials.parquet only, logged when it "
                        "works again (next trial, end of study, or --resume)", str(exc)[:300], len(self.untracked()))
            return False
        return True

    def reconcile(self) -> None:
        """On resume: finished trials whose MLflow run is missing (or not yet linked) get it now."""
        for result in sorted(self.trials.values(), key=lambda t: t.number):
            if result.trial_id in self.logged and result.mlflow_run_id != self.logged[result.trial_id]:
                self._log(result)
        self.replay()
