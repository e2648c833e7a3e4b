"""The seam between the study driver and where trials run: one protocol, executors registered by name.

`ray` (tuner.run.ray_executor): Ray Tune trials on a Ray cluster (the default). `local`
(tuner.run.local_executor): plain subprocesses on this host, one per GPU, for a host without Ray. Both
take the same SearchCore (Optuna ask/tell), report every finished trial through the same Recorder
(trials.parquet, then MLflow) and stop the same way on a signal, a fault or the time budget; the driver
(tuner.run.driver) and the flow (tuner.run.flow) never ask which one runs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tuner.common.errors import SpecError

if TYPE_CHECKING:
    from tuner.run.recorder import Recorder
    from tuner.search.searcher import SearchCore
    from tuner.spec.study import Study
    from tuner.trial.result import TrialResult

# name -> "module:Class"; imported only when chosen (the local path never imports Ray)
EXECUTORS: dict[str, str] = {
    "ray": "tuner.run.ray_executor:RayExecutor",
    "local": "tuner.run.local_executor:LocalExecutor",
}


@dataclass
class SearchJob:
    """What an executor runs: `trials` more configs asked from `core`, at most `max_concurrent` at once."""

    study: Study
    data: dict[str, Any]  # the study as loaded (trials re-validate it in their own process)
    out: Path
    base_dir: Path
    core: SearchCore
    recorder: Recorder
    trials: int
    max_concurrent: int
    name: str  # "search", or "search-resume-<n>" for a resumed driver


class Executor(Protocol):
    name: str

    def start(self, study: Study, *, verbose: bool) -> None:
        """Get ready to run trials (join or start Ray; find the host's GPUs)."""

    def helper_pids(self) -> tuple[list[int], str]:
        """Helper processes it started (Ray's) and their session, for the output lock's cleanup."""

    def fit(self, study: Study, max_concurrent: int) -> int:
        """Check one trial fits (SpecError when not); returns max_concurrent clamped to what fits."""

    def cluster_gpus(self) -> float:
        """GPUs trials can be given."""

    def run(self, job: SearchJob) -> None:
        """Run the job's trials until done, the space is exhausted, a signal or fault, or the time budget."""

    def confirmer(self, study: Study, data: dict[str, Any], out: Path,
                  base_dir: Path) -> Callable[[TrialResult, int], TrialResult]:
        """A function re-running a finished trial's config with another workload seed (promotion)."""


def get_executor(name: str) -> Executor:
    """The executor registered as `name`."""
    if name not in EXECUTORS:
        raise SpecError(f"unknown executor {name!r}", "--executor / resources.executor",
                        f"use one of {', '.join(EXECUTORS)}")
    module, cls = EXECUTORS[name].split(":")
    executor: Executor = getattr(importlib.import_module(module), cls)()
    return executor
