"""A study after validation: search, outputs, report, promotion, summary. Returns the exit status."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner.common.atomic import write_json
from tuner.common.errors import SpecError
from tuner.common.prog import prog
from tuner.run.outputs import write_pareto
from tuner.run.summary import print_summary
from tuner.search.signals import EXIT_INTERRUPTED, Interrupt
from tuner.search.space import Space
from tuner.spec.study import Study
from tuner.tracking.credentials import strip_credentials
from tuner.tracking.mlflow_log import StudyTracker
from tuner.trial.result import TrialResult
from tuner.trial.table import read_trials

if TYPE_CHECKING:
    from tuner.run.executor import Executor

log = logging.getLogger(__name__)
STATE = "state.json"
EXIT_UNTRACKED = 4  # finished, but MLflow missed records (it was down): --resume logs them


def _progress(study: Study, trials: int) -> Any:
    try:
        from tuner.run.progress import StudyProgress

        return StudyProgress(trials, study.budget.time_limit_s, objective_metric=study.objective.metric)
    except ImportError:  # pragma: no cover - progress view is optional
        from contextlib import nullcontext

        class _Quiet(nullcontext):
            def trial_started(self, *a: Any) -> None: ...
            def trial_finished(self, *a: Any) -> None: ...

        return _Quiet()


def run_study(study: Study, data: dict[str, Any], study_path: Path, space: Space, out: Path, uri: str, *,
              executor: Executor, max_concurrent: int, resume: bool, promote: bool) -> int:
    from tuner.run.driver import run_search
    from tuner.run.resume_check import measured, read_state

    t0 = time.monotonic()
    base_dir = study_path.parent.resolve()
    state = read_state(out) if resume else {}
    for key, value in (("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2"), ("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1"),
                       ("MLFLOW_HTTP_REQUEST_TIMEOUT", "20")):
        os.environ.setdefault(key, value)  # a short retry window: an outage is buffered, not waited out
    params = {"engine": ",".join(study.engine_names), "model": study.model.name, "sla": ";".join(map(str, study.sla)),
              "objective": study.objective.metric, "trials": study.budget.trials, "seed": study.seed,
              "workload": json.dumps(study.workload.model_dump(mode="json"))}
    deferred = study.tracking.mode == "deferred"
    if not resume:
        clear_previous(out)
    tracker: StudyTracker | None = None
    if deferred:  # MLflow is not called until the study's records are complete (tuner.tracking.deferred)
        from tuner.run.recorder import param_names
        from tuner.tracking.deferred import start_record

        parent = state.get("parent_run_id") or ""
        names, defaults = param_names(space)
        start_record(out, study_file=study_path, study_name=study.name,
                     experiment=study.tracking.experiment or study.name, space=space.describe(), params=params,
                     param_names=names, defaults=defaults, sla=[str(t) for t in study.sla])
        if promote:
            print("note: deferred tracking: nothing is promoted (the registry is MLflow's); promote after "
                  f"logging with: {prog('promote')} --study-run <parent run id>", file=sys.stderr)
            promote = False
    else:
        tracker = StudyTracker(uri, study.tracking.experiment or study.name, study.name, out / "mlartifacts",
                               sla=study.sla)
        if not resume:
            _close_stale_parent(tracker, out)
        parent = _start_parent(tracker, state, uri)
    write_json(out / STATE, {"parent_run_id": parent, "tracking_uri": strip_credentials(uri), "study": str(study_path),
                             "study_name": study.name, "tracking": study.tracking.mode, "measured": measured(study)})
    if not state and tracker is not None:
        tracker.log_study(study_path, space.describe(), params)
    status = "FAILED"
    try:
        with _progress(study, study.budget.trials) as progress:
            run = run_search(study, data, space, out, base_dir, tracker, progress, executor,
                             trials=study.budget.trials, max_concurrent=max_concurrent, resume=resume)
        trials = run.trials
        if Interrupt.signum is not None:
            status = "KILLED"
            return interrupted(study, study_path, out, len(trials))
        promotion = None
        if run.untracked and promote:  # the registry would point at trials MLflow has no run for
            print(f"not promoting: {len(run.untracked)} trial(s) are not in MLflow yet", file=sys.stderr)
            promote = False
        if promote and resume:  # a finished study resumed: its promotion stands unless trials or settings changed
            from tuner.promote.pipeline import previous_promotion

            promotion = previous_promotion(study, trials, out, uri)
        if promotion is None:
            _remove(out, *PROMOTION_FILES)  # this run's promotion writes them again; none stays from an older one
        if promote and promotion is None:  # with no feasible trial too: the promotion run records why nothing is
            from tuner.promote import promote_study

            confirm = (executor.confirmer(study, data, out, base_dir)
                       if study.promotion.confirm_runs and any(t.feasible for t in trials) else None)
            promotion = promote_study(study, trials, output_dir=out, tracking_uri=uri, parent_run_id=parent,
                                      confirm=confirm)
        promoted_id = promotion.trial.trial_id if promotion is not None and promotion.promoted and promotion.trial else None
        write_pareto(out / "pareto.json", trials, study.sla, study.objective.metric, study.objective.latency_metric,
                     run.rejected, promoted_id)
        confirmed = _confirmed(promotion)
        report = _report(study, trials, out, promoted_id, confirmed)
        base = next((t for t in trials if t.baseline), None)
        best = max((t for t in trials if t.feasible), key=lambda t: t.objective or 0, default=None)
        outputs = [out / "trials.parquet", out / "pareto.json", out / "promoted.yaml", out / "sim_gate.jsonl",
                   *([report] if report else [])]
        summary = {"trials_ok": sum(t.outcome.ran for t in trials),
                   "trials_failed": sum(not t.outcome.ran for t in trials),
                   "best_objective": best.objective if best else None,
                   "baseline_objective": base.objective if base else None,
                   "tuned_vs_default": confirmed["gain"] if confirmed else
                   (best.objective / base.objective) if best and best.objective is not None and base
                   and base.objective else None}
        if tracker is None:
            status = "FINISHED"
            parent = _log_deferred(out, uri, outputs, summary, run)
        else:
            try:
                tracker.log_outputs([*outputs, *sorted((out / "plots").glob("*.html"))], summary)
            except Exception as exc:  # noqa: BLE001 - MLflow down at the end: the files are all in the output folder
                log.warning("study outputs not logged to MLflow: %s", str(exc)[:300])
                run.untracked = run.untracked or ["study outputs"]
        from tuner.run.local_ray import finish_quietly

        finish_quietly()  # the study is done: a Ctrl-C now must not make it exit 130, 'nothing promoted'
        print_summary(study, trials, out, uri, promotion, run.rejected, time.monotonic() - t0,
                      parent_run_id=parent or None, mlflow_view=tracker.view_path if tracker else None)
        status = "FINISHED"
        if run.untracked:
            how = (f"{prog('run')} --log-only {out}" if deferred else
                   f"{prog('run')} --study {study_path} --output {out} --resume")
            print(f"MLflow is missing {len(run.untracked)} record(s) ({', '.join(run.untracked[:10])}): they are "
                  f"kept in {out / 'trials.parquet'}; log them with: {how}", file=sys.stderr)
            return EXIT_UNTRACKED
        if best is None:
            return 3
        return 0
    except KeyboardInterrupt:  # a second signal, or one outside the search: stop here, promote nothing
        status = "KILLED"
        return interrupted(study, study_path, out, len(read_trials(out / "trials.parquet")))
    finally:
        if tracker is not None:
            try:
                tracker.finish(status)
            except Exception as exc:  # noqa: BLE001 - MLflow down: the parent stays RUNNING; --resume closes it
                log.warning("MLflow parent run not closed (%s): %s", status, str(exc)[:300])
        else:
            from tuner.tracking.deferred import update_record

            update_record(out, status=status)


def _log_deferred(out: Path, uri: str, outputs: list[Path], summary: dict[str, Any], run: Any) -> str:
    """End of a deferred study: its records complete in tracking.json, then logged to MLflow if it answers
    (else kept for `--log-only`). Returns the parent run id ("" while not logged)."""
    from tuner.tracking.deferred import log_folder, read_record, update_record

    update_record(out, status="FINISHED", outputs=[p.name for p in outputs], summary=summary)
    try:
        logged = log_folder(out, uri)
    except Exception as exc:  # noqa: BLE001 - the tracking server out of reach: everything stays in the folder
        log.warning("MLflow logging deferred (%s)", str(exc)[:300])
        run.untracked = [t.trial_id for t in run.trials] or ["study outputs"]
        return str(read_record(out).get("parent_run_id") or "")
    run.untracked = []
    return logged.parent_run_id


# What one run writes for the whole study: a fresh run over a folder must not show (or log to MLflow, or
# resume from) an earlier run's. Per-trial folders (trials/<id>) and the MLflow and Optuna stores stay.
PROMOTION_FILES = ("promoted.yaml", "promotion.json")
STUDY_FILES = ("trials.parquet", "pareto.json", "report.html", "sim_gate.jsonl", "tracking.json", *PROMOTION_FILES)


def _remove(out: Path, *names: str) -> list[str]:
    gone = []
    for name in names:
        path = out / name
        if path.is_file():
            path.unlink()
            gone.append(name)
    return gone


def clear_previous(out: Path) -> None:
    """A fresh (not --resume) run over an output folder: the earlier run's study files go, so a promoted.yaml,
    a pareto.json or trials of another run never pass for this one's (its MLflow runs are kept)."""
    gone = _remove(out, *STUDY_FILES)
    for fig in sorted((out / "plots").glob("*.html")):
        fig.unlink()
    if gone:
        print(f"note: a fresh run on {out}: the earlier run's {', '.join(gone)} removed (its MLflow runs stay); "
              "continue a study with --resume instead", file=sys.stderr)


def _start_parent(tracker: StudyTracker, state: dict[str, Any], uri: str) -> str:
    """The study's MLflow parent run: a new one, or on resume the one in state.json, which must be in this
    store (a resume against another store used to end in a traceback, exit 1)."""
    from mlflow.exceptions import MlflowException

    run_id = state.get("parent_run_id") or None
    try:
        return tracker.start(run_id)
    except MlflowException as exc:
        if run_id is None or exc.error_code != "RESOURCE_DOES_NOT_EXIST":
            raise
        raise SpecError(f"the study's MLflow parent run {run_id} is not in {strip_credentials(uri)}", "--mlflow-uri",
                        f"resume with the store the study started in: --mlflow-uri {state.get('tracking_uri')} "
                        "(with its user and password if the server needs them)") from None


def _close_stale_parent(tracker: StudyTracker, out: Path) -> None:
    """A fresh run over a folder whose last driver was killed: that run's MLflow parent, still RUNNING,
    is marked KILLED (it will never finish)."""
    try:
        old = json.loads((out / STATE).read_text()).get("parent_run_id")
    except (OSError, ValueError, AttributeError):
        return
    if old and tracker.close_if_running(old):
        print(f"note: MLflow run {old} of an earlier, killed run on {out} was still RUNNING; marked KILLED",
              file=sys.stderr)


def interrupted(study: Study, study_path: Path, out: Path, finished: int) -> int:
    """What an interrupted study says: what is kept, that nothing was promoted, how to continue."""
    print(f"{Interrupt.name()}: study {study.name} interrupted; {finished} finished trial(s) kept in "
          f"{out / 'trials.parquet'}; nothing promoted.\n"
          f"continue with: {prog('run')} --study {study_path} --output {out} --resume", file=sys.stderr)
    return EXIT_INTERRUPTED


def _confirmed(promotion: Any) -> dict[str, Any] | None:
    """The promotion's confirmed figures, which the report card and MLflow quote as they are."""
    if promotion is None or promotion.gain is None and not promotion.defaults_won:
        return None
    return {"promoted": promotion.worst_objective, "baseline": promotion.baseline_worst_objective,
            "gain": promotion.gain, "defaults_won": promotion.defaults_won}


def _report(study: Study, trials: list[TrialResult], out: Path, promoted_id: str | None,
            confirmed: dict[str, Any] | None = None) -> Path | None:
    try:
        from tuner.tracking.report import write_report
    except ImportError:
        return None
    base = next((t for t in trials if t.baseline), None)
    try:
        return write_report(out, study_name=study.name, trials=trials, sla=study.sla,
                            objective_metric=study.objective.metric, latency_metric=study.objective.latency_metric,
                            promoted_trial_id=promoted_id, baseline_trial_id=base.trial_id if base else None,
                            figure_files=True, confirmed=confirmed)
    except Exception as exc:  # noqa: BLE001 - a report problem must not fail a finished study
        log.warning("report.html could not be written: %s", exc)
        return None
