"""The `ray` executor: each trial a Ray Tune trial (an actor holding the CPUs and GPUs its config needs).

Ray picks each trial's GPUs and sets CUDA_VISIBLE_DEVICES; the trial reads them back from
ray.get_gpu_ids() (tuner.trial.runner.assigned_gpus). Only the driver writes trials.parquet, Optuna and
MLflow: trials report one result, which a Tune callback hands to the study's Recorder.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ray
from ray import tune

from tuner.run.executor import SearchJob
from tuner.run.recorder import Recorder
from tuner.run.resources import check_fit, layout_gpus, trial_resources
from tuner.search.ask_tell import Suggestion, TrialReport
from tuner.search.signals import Interrupt
from tuner.spec.load import validate
from tuner.spec.study import Study
from tuner.trial.outcome import TrialOutcome
from tuner.trial.result import TrialResult
from tuner.trial.runner import TrialPlan, run_trial, trial_dir


def trainable(config: dict[str, Any], *, study_data: dict[str, Any], output_dir: str, base_dir: str) -> None:
    """Runs one config and reports one final result (outcome, objective, SLA violations, the whole trial)."""
    study = validate(Study, study_data, "study")
    trial_id = tune.get_context().get_trial_id() or "local"
    cfg = Suggestion.from_config(config)
    plan = TrialPlan(
        trial_id=trial_id, number=cfg.number, engine=cfg.engine, args=cfg.args, params=cfg.params,
        baseline=cfg.baseline, seed=study.seed, notes=list(cfg.notes), incumbent=cfg.incumbent,
        incumbent_capacity=cfg.incumbent_capacity,
    )
    result = run_trial(study, plan, trial_dir(Path(output_dir), plan.number, trial_id), base_dir=Path(base_dir))
    tune.report(tune_result(study, result))


def tune_result(study: Study, result: TrialResult) -> dict[str, Any]:
    """What the searcher sees (its TrialReport) plus the full trial as JSON, for the driver's recorder."""
    return {**TrialReport.of(study, result).to_tune(), "trial_json": json.dumps(result.to_json(), default=str)}


class _TuneRecorder(tune.Callback):
    """Tune's view of the Recorder: each trial's one report is persisted before Tune tells the searcher."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def __getstate__(self) -> dict[str, Any]:
        """Tune pickles its run config; the recorder's live handles stay in the driver."""
        return {}

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        cfg = Suggestion.from_config(trial.config)
        self.recorder.started(trial.trial_id, cfg.engine, cfg.params)

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        """Written to trials.parquet here, before Tune tells the searcher (and so Optuna): a driver stopped
        in between leaves a trial Optuna still shows RUNNING (told on resume). MLflow and the progress
        line follow in on_trial_complete."""
        if "trial_json" in result:
            self.recorder.persist(TrialResult.from_json(json.loads(result["trial_json"])))

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        res = trial.last_result or {}
        if "trial_json" in res:
            self.recorder.record(TrialResult.from_json(json.loads(res["trial_json"])))

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        cfg = Suggestion.from_config(trial.config)
        self.recorder.record(TrialResult(
            trial_id=trial.trial_id, number=cfg.number, engine=cfg.engine, params=cfg.params, args=cfg.args,
            outcome=TrialOutcome.CRASHED,
            reason=f"trial actor failed: {str(getattr(trial, 'error_msg', '') or 'see Tune logs')[:300]}",
            baseline=cfg.baseline,
        ))


class InterruptStopper(tune.Stopper):
    """Stops the whole Tune experiment once a signal arrived. Pickles to nothing (the flag is per process)."""

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return False

    def stop_all(self) -> bool:
        return Interrupt.signum is not None or Interrupt.failure is not None

    def __getstate__(self) -> dict[str, Any]:
        return {}


def layout_resources(study: Study, engine: str) -> Any:
    """Per-trial resources: a trial whose args set a parallel layout holds TP x DP GPUs (when trials
    hold GPUs at all: a GPU cluster or resources.gpus_per_trial), else `trial_resources`."""
    from ray.tune import PlacementGroupFactory

    base = trial_resources(study, engine, lambda: ray.cluster_resources().get("GPU", 0))

    def per_trial(config: dict[str, Any]) -> PlacementGroupFactory:
        gpus = layout_gpus(study, base["gpu"], config.get("args") or {})
        return PlacementGroupFactory([{"CPU": base["cpu"], "GPU": gpus}])

    return per_trial


class RayExecutor:
    """Trials as Ray Tune trials on the Ray cluster in RAY_ADDRESS, the one `ray start` left, or a local one."""

    name = "ray"

    def start(self, study: Study, *, verbose: bool) -> None:
        """Join the cluster in RAY_ADDRESS or the one `ray start` made on this node (as under `ray job
        submit`), else start a local Ray (bound to 127.0.0.1, see tuner.run.local_ray). `RAY_ADDRESS=local`
        always starts a private one."""
        from tuner.run.local_ray import init_kwargs
        from tuner.run.quiet import ray_log_level

        if not ray.is_initialized():
            ray.init(log_to_driver=False, logging_level=ray_log_level(verbose), **init_kwargs())

    def helper_pids(self) -> tuple[list[int], str]:
        from tuner.run.lock import local_ray_processes

        return local_ray_processes()

    def cluster_gpus(self) -> float:
        return float(ray.cluster_resources().get("GPU", 0))

    def fit(self, study: Study, max_concurrent: int) -> int:
        total = ray.cluster_resources()
        res = trial_resources(study, study.engine_names[0], total.get("GPU", 0))
        return check_fit(res, total.get("GPU", 0), total.get("CPU", 0), max_concurrent, "the Ray cluster")

    def run(self, job: SearchJob) -> None:
        from tuner.search.tune_searcher import ConstrainedSearcher

        study = job.study
        fn = tune.with_parameters(trainable, study_data=job.data, output_dir=str(job.out), base_dir=str(job.base_dir))
        fn = tune.with_resources(fn, layout_resources(study, study.engine_names[0]))
        run_config = tune.RunConfig(
            name=job.name, storage_path=str((job.out / "tune").resolve()), callbacks=[_TuneRecorder(job.recorder)],
            verbose=0, stop=InterruptStopper(), failure_config=tune.FailureConfig(max_failures=0, fail_fast=False),
            checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=False),
        )
        tuner = tune.Tuner(
            fn,
            tune_config=tune.TuneConfig(
                search_alg=ConstrainedSearcher(job.core), num_samples=job.trials,
                max_concurrent_trials=job.max_concurrent, time_budget_s=study.budget.time_limit_s, reuse_actors=True,
            ),
            run_config=run_config,
        )
        tuner.fit()

    def confirmer(self, study: Study, data: dict[str, Any], out: Path,
                  base_dir: Path) -> Callable[[TrialResult, int], TrialResult]:
        """Re-run a trial's config with another workload seed, as a Ray task holding the trial's resources."""

        @ray.remote(max_retries=0)
        def _confirm(data: dict[str, Any], plan: TrialPlan, tdir: str, base: str) -> TrialResult:
            return run_trial(validate(Study, data, "study"), plan, Path(tdir), base_dir=Path(base))

        def confirm(trial: TrialResult, seed: int) -> TrialResult:
            res = trial_resources(study, trial.engine, self.cluster_gpus)
            plan = TrialPlan(trial_id=f"{trial.trial_id}-c{seed}", number=trial.number, engine=trial.engine,
                             args=trial.args, params=trial.params, seed=seed)
            tdir = trial_dir(out, trial.number, plan.trial_id)
            return ray.get(_confirm.options(num_cpus=res["cpu"], num_gpus=res["gpu"]).remote(
                data, plan, str(tdir), str(base_dir)))

        return confirm
