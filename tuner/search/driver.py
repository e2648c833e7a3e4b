"""The study driver: Ray Tune + the constrained Optuna searcher, results streamed to disk and MLflow.

Finished trials are written to trials.parquet and MLflow as each completes, so a killed driver
loses nothing finished; the Optuna study lives in the output folder's optuna.db, and `resume` continues
from it (tuner.search.resume), runs the rest as a new Tune experiment and reconciles MLflow runs.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray
from ray import tune

from tuner.common.errors import DiskFullError
from tuner.search.ask_tell import Suggestion
from tuner.search.resume import open_storage
from tuner.search.signals import Interrupt, InterruptStopper
from tuner.search.space import Space
from tuner.search.trainable import trainable
from tuner.spec import levers
from tuner.spec.study import Study
from tuner.tracking.mlflow_log import StudyTracker
from tuner.trial.outcome import TrialOutcome
from tuner.trial.result import TrialResult
from tuner.trial.table import read_trials, write_trials

log = logging.getLogger(__name__)


@dataclass
class SearchRun:
    trials: list[TrialResult]
    untracked: list[str] = field(default_factory=list)  # trial ids with no MLflow run (MLflow was down)
    rejected: list[dict[str, Any]] = field(default_factory=list)
    wall_s: float = 0.0


class _Recorder(tune.Callback):
    """Streams each finished trial to trials.parquet, MLflow and the progress view, in the driver."""

    def __init__(self, study: Study, space: Space, out: Path, tracker: StudyTracker, progress: Any,
                 known: dict[str, TrialResult], logged: dict[str, str]) -> None:
        self.study, self.space, self.out, self.tracker, self.progress = study, space, out, tracker, progress
        self.trials = known
        self._finished: set[str] = set(known)  # recorded and logged (or left to reconcile on resume)
        self.logged = logged
        names: list[str] = []
        defaults: dict[str, Any] = {}
        for sp in space.engines.values():
            names += [n for n in sp.params if n not in names]
            defaults.update(sp.defaults())
        self.param_names, self.defaults = names, defaults

    def __getstate__(self) -> dict[str, Any]:
        """Tune pickles its run config; the recorder's live handles stay in the driver (re-attached on resume)."""
        return {}

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        cfg = Suggestion.from_config(trial.config)
        self.progress.trial_started(trial.trial_id, cfg.engine, cfg.params)

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        """The trial's one report: written to trials.parquet here, before Tune tells the searcher (and so
        Optuna) of it, so a driver stopped in between leaves a trial Optuna still shows RUNNING (told on
        resume). MLflow and the progress line follow in on_trial_complete (Tune times this hook)."""
        if "trial_json" in result:
            self._persist(_from_json(json.loads(result["trial_json"])))

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        res = trial.last_result or {}
        if "trial_json" in res:
            self._record(_from_json(json.loads(res["trial_json"])))

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        cfg = Suggestion.from_config(trial.config)
        self._record(TrialResult(
            trial_id=trial.trial_id, number=cfg.number, engine=cfg.engine, params=cfg.params, args=cfg.args,
            outcome=TrialOutcome.CRASHED,
            reason=f"trial actor failed: {str(getattr(trial, 'error_msg', '') or 'see Tune logs')[:300]}",
            baseline=cfg.baseline,
        ))

    def record(self, result: TrialResult) -> None:
        self._record(result)

    def _record(self, result: TrialResult) -> None:
        """trials.parquet first, then MLflow: a driver killed in between leaves a trial that resume
        logs to MLflow (`reconcile`), never an MLflow run for a trial that resume would run again."""
        if result.trial_id in self._finished or not self._persist(result):
            return
        result = self.trials[result.trial_id]
        self._finished.add(result.trial_id)
        self._log(result)
        self.progress.trial_finished(result)

    def _persist(self, result: TrialResult) -> bool:
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


def _from_json(d: dict[str, Any]) -> TrialResult:
    d = dict(d)
    d["outcome"] = TrialOutcome(d["outcome"])
    return TrialResult(**d)


def trial_resources(study: Study, engine: str) -> dict[str, float]:
    """CPUs and GPUs one trial holds. GPU engines default to their tensor-parallel size when the cluster has GPUs."""
    from tuner.engines import engine_class

    gpus = study.resources.gpus_per_trial
    if gpus == 0 and engine_class(engine).uses_gpu and ray.cluster_resources().get("GPU", 0) > 0:
        gpus = float(study.model.tensor_parallel_size)
    return {"cpu": study.resources.cpus_per_trial, "gpu": gpus}


def layout_resources(study: Study, engine: str) -> Any:
    """Per-trial resources: a trial whose args set a parallel layout holds TP x DP GPUs (when trials
    hold GPUs at all: a GPU cluster or resources.gpus_per_trial), else `trial_resources`."""
    from ray.tune import PlacementGroupFactory

    base = trial_resources(study, engine)

    def per_trial(config: dict[str, Any]) -> PlacementGroupFactory:
        args = config.get("args") or {}
        gpus = base["gpu"]
        if gpus > 0 and any(k in args for k in levers.LAYOUT_ARGS):
            gpus = float(levers.gpus(args, study.model.tensor_parallel_size))
        return PlacementGroupFactory([{"CPU": base["cpu"], "GPU": gpus}])

    return per_trial


def run_search(study: Study, study_data: dict[str, Any], space: Space, out: Path, base_dir: Path,
               tracker: StudyTracker, progress: Any, *, trials: int, max_concurrent: int, resume: bool) -> SearchRun:
    from tuner.search.prescreen import warm_configs
    from tuner.search.searcher import make_searcher, secretless
    from tuner.search.study_gate import gate_for

    t0 = time.monotonic()
    known = {t.trial_id: t for t in read_trials(out / "trials.parquet")} if resume else {}
    logged = tracker.logged_trials() if resume else {}
    recorder = _Recorder(study, space, out, tracker, progress, known, logged)
    if resume:
        recorder.reconcile()
    engines = study.engine_names
    fn = tune.with_parameters(trainable, study_data=study_data, output_dir=str(out), base_dir=str(base_dir))
    fn = tune.with_resources(fn, layout_resources(study, engines[0]))
    storage = str((out / "tune").resolve())
    searcher = make_searcher(study, space, warm_configs(study),
                             storage=open_storage(out, study.name, fresh=not resume),
                             gate=gate_for(secretless(study), space, out))
    name, remaining = "search", trials
    if resume:
        # Optuna's storage holds the search; trials.parquet the record of what finished (Tune saves its
        # experiment state only every few seconds, so it can lag): line them up, run the rest as a new experiment.
        for result in searcher.core.resume(list(known.values())):
            recorder.record(result)
        name, remaining = f"search-resume-{len(recorder.trials)}", trials - len(recorder.trials)
    if recorder.trials and hasattr(progress, "restore"):
        progress.restore(list(recorder.trials.values()))
    if remaining > 0:
        run_config = tune.RunConfig(
            name=name, storage_path=storage, callbacks=[recorder], verbose=0, stop=InterruptStopper(),
            failure_config=tune.FailureConfig(max_failures=0, fail_fast=False),
            checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=False),
        )
        tuner = tune.Tuner(
            fn,
            tune_config=tune.TuneConfig(
                search_alg=searcher, num_samples=remaining, max_concurrent_trials=max_concurrent,
                time_budget_s=study.budget.time_limit_s, reuse_actors=True,
            ),
            run_config=run_config,
        )
        Interrupt.searching = True  # a signal now stops the trials (InterruptStopper), not the driver
        try:
            tuner.fit()
        finally:
            Interrupt.searching = False
        if Interrupt.failure is not None:
            raise Interrupt.failure
    rejected = list(getattr(searcher, "rejected", []))
    recorder.replay()  # MLflow back after an outage: the trials it missed are logged now
    return SearchRun(trials=sorted(recorder.trials.values(), key=lambda t: t.number), rejected=rejected,
                     wall_s=time.monotonic() - t0, untracked=recorder.untracked())
