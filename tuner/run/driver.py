"""The study driver: the constrained Optuna searcher asking, an executor running trials, results streamed to disk.

Finished trials are written to trials.parquet and MLflow as each completes (tuner.run.recorder), so a
killed driver loses nothing finished; the Optuna study lives in the output folder's optuna.db, and
`resume` continues from it (tuner.search.resume), runs the rest and reconciles MLflow runs. Which
executor runs the trials (Ray Tune or local processes, tuner.run.executor) changes none of that.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner.run.executor import SearchJob
from tuner.run.recorder import Recorder
from tuner.search.resume import open_storage
from tuner.search.signals import Interrupt
from tuner.search.space import Space
from tuner.spec.study import Study
from tuner.tracking.mlflow_log import StudyTracker
from tuner.trial.result import TrialResult
from tuner.trial.table import read_trials

if TYPE_CHECKING:
    from tuner.run.executor import Executor


@dataclass
class SearchRun:
    trials: list[TrialResult]
    untracked: list[str] = field(default_factory=list)  # trial ids with no MLflow run (MLflow was down)
    rejected: list[dict[str, Any]] = field(default_factory=list)
    wall_s: float = 0.0


def run_search(study: Study, study_data: dict[str, Any], space: Space, out: Path, base_dir: Path,
               tracker: StudyTracker | None, progress: Any, executor: Executor, *, trials: int, max_concurrent: int,
               resume: bool) -> SearchRun:
    """Search until `trials` trials finished (counting a resumed study's), on `executor`.
    `tracker` None: deferred tracking (nothing logged to MLflow during the search)."""
    from tuner.search.prescreen import warm_configs
    from tuner.search.searcher import make_core, secretless
    from tuner.search.study_gate import gate_for

    t0 = time.monotonic()
    known = {t.trial_id: t for t in read_trials(out / "trials.parquet")} if resume else {}
    logged = tracker.logged_trials() if resume and tracker is not None else {}
    recorder = Recorder(study, space, out, tracker, progress, known, logged)
    if resume:
        recorder.reconcile()
    core = make_core(study, space, warm_configs(study), storage=open_storage(out, study.name, fresh=not resume),
                     gate=gate_for(secretless(study), space, out))
    name, remaining = "search", trials
    if resume:
        # Optuna's storage holds the search; trials.parquet the record of what finished (Tune saves its
        # experiment state only every few seconds, so it can lag): line them up, run the rest as a new experiment.
        for result in core.resume(list(known.values())):
            recorder.record(result)
        name, remaining = f"search-resume-{len(recorder.trials)}", trials - len(recorder.trials)
    if recorder.trials and hasattr(progress, "restore"):
        progress.restore(list(recorder.trials.values()))
    if remaining > 0:
        Interrupt.searching = True  # a signal now stops the trials, not the driver
        try:
            executor.run(SearchJob(study=study, data=study_data, out=out, base_dir=base_dir, core=core,
                                   recorder=recorder, trials=remaining, max_concurrent=max_concurrent, name=name))
        finally:
            Interrupt.searching = False
        if Interrupt.failure is not None:
            raise Interrupt.failure
    recorder.replay()  # MLflow back after an outage: the trials it missed are logged now
    return SearchRun(trials=sorted(recorder.trials.values(), key=lambda t: t.number), rejected=list(core.rejected),
                     wall_s=time.monotonic() - t0, untracked=recorder.untracked())
