"""What one trial holds (CPUs, GPUs), whichever executor runs it. No Ray here: the local executor uses it too."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tuner.spec import levers
from tuner.spec.study import Study


def trial_resources(study: Study, engine: str, cluster_gpus: float | Callable[[], float]) -> dict[str, float]:
    """CPUs and GPUs one trial holds. GPU engines default to their tensor-parallel size when the
    cluster (Ray's, or the local executor's host) has GPUs (`cluster_gpus`, asked only then)."""
    from tuner.engines import engine_class

    gpus = study.resources.gpus_per_trial
    if gpus == 0 and engine_class(engine).uses_gpu and (cluster_gpus() if callable(cluster_gpus) else cluster_gpus) > 0:
        gpus = float(study.model.tensor_parallel_size)
    return {"cpu": study.resources.cpus_per_trial, "gpu": gpus}


def layout_gpus(study: Study, base_gpus: float, args: dict[str, Any]) -> float:
    """A trial whose args set a parallel layout holds TP x DP GPUs (when trials hold GPUs at all)."""
    if base_gpus > 0 and any(k in args for k in levers.LAYOUT_ARGS):
        return float(levers.gpus(args, study.model.tensor_parallel_size))
    return base_gpus


def check_fit(res: dict[str, float], gpus: float, cpus: float, max_concurrent: int, where: str) -> int:
    """Each trial must fit on the cluster (else exit 2); max_concurrent is clamped to what it allows."""
    import logging

    from tuner.common.errors import SpecError

    if res["gpu"] > gpus:
        raise SpecError(f"a trial needs {res['gpu']:g} GPU(s) but {where} has {gpus:g}",
                        "resources.gpus_per_trial", "lower gpus_per_trial / tensor_parallel_size or add GPUs")
    if res["cpu"] > cpus:
        raise SpecError(f"a trial needs {res['cpu']:g} CPUs but {where} has {cpus:g}",
                        "resources.cpus_per_trial", "lower cpus_per_trial")
    fit = min(cpus // res["cpu"], gpus // res["gpu"] if res["gpu"] else 1e9)
    if max_concurrent > fit:
        logging.getLogger("tuner.run").warning("max_concurrent %d does not fit %s (%g CPU, %g GPU); running %d at once",
                                               max_concurrent, where, cpus, gpus, int(fit))
        return max(1, int(fit))
    return max_concurrent
