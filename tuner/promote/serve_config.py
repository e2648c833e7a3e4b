"""promoted.yaml: a Ray Serve config file (`serve run` / `serve deploy`) for the winning config.

The file names one of our builders by import path (``serve_apps.<engine>:build_app``) and passes it
the tuned engine arguments plus deployment options derived from the measured capacity:

- in-flight requests one replica holds within the SLA: the capacity itself in concurrency mode, or
  Little's law (rate x mean end-to-end latency) in rate mode;
- ``autoscaling_config.target_ongoing_requests`` = that number, so Serve adds a replica before the
  load on one exceeds what met the SLA;
- ``max_ongoing_requests`` = 1.25 x that number, so a burst queues in Serve (where another replica
  can take it) instead of inside one overloaded engine.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import yaml

from serve_apps.args import AppArgs, Autoscaling, DeploymentArgs
from tuner.common.atomic import write_text
from tuner.common.redact import is_secret_key
from tuner.engines import engine_class, get_engine
from tuner.engines.base import user_dir
from tuner.spec.study import EngineSettings, SimSettings, Study
from tuner.trial.result import TrialResult

HEADROOM = 1.25
_ACCELERATORS = ("GB200", "GB300", "B200", "B300", "H200", "H100", "H20", "A100", "L40S", "L4", "A10G",
                 "T4", "V100")


def in_flight(study: Study, capacity: float, metrics: dict[str, float]) -> float:
    """Requests one replica holds at its SLA capacity."""
    if study.capacity.mode == "concurrency":
        return max(capacity, 1.0)
    e2e_ms = metrics.get("mean_e2el_ms") or metrics.get("p50_e2el_ms")
    if not e2e_ms or math.isnan(e2e_ms):
        return max(capacity, 1.0)  # no latency measured: at least one request per req/s
    return max(capacity * e2e_ms / 1000.0, 1.0)


def deployment_args(study: Study, capacity: float | None, metrics: dict[str, float]) -> DeploymentArgs:
    replicas = study.promotion.replicas
    held = in_flight(study, capacity, metrics) if capacity else 1.0
    return DeploymentArgs(
        max_ongoing_requests=max(2, math.ceil(held * HEADROOM)),
        autoscaling_config=Autoscaling(
            min_replicas=replicas,
            initial_replicas=replicas,
            max_replicas=2 * replicas,
            target_ongoing_requests=round(held, 2),
        ),
        num_cpus=study.resources.cpus_per_trial,
    )


def accelerator_type(name: str | None) -> str | None:
    """'NVIDIA H200' or 'NVIDIA A100-SXM4-80GB' -> Ray's accelerator type ('H200', 'A100-80G')."""
    upper = (name or "").upper()
    for acc in _ACCELERATORS:  # longer names first: H200 before H20, L40S before L4
        if acc in upper:
            if acc == "A100" and ("80G" in upper or "40G" in upper):
                return "A100-80G" if "80G" in upper else "A100-40G"
            return acc
    return None


def hardware(study: Study, trial: TrialResult) -> str:
    """What the capacity was measured on (a simulated GPU is named as such)."""
    if engine_class(trial.engine).simulated:
        return f"sim:{study.sim.flavour}:{study.sim.gpu}"
    for key in ("gpu_name", "gpu", "hardware", "device_name"):
        value = trial.resolved.get(key)
        if value:
            return str(value)
    return "unknown"


def app_args(study: Study, trial: TrialResult, *, capacity: float | None = None,
             lineage: dict[str, str] | None = None) -> AppArgs:
    """Builder arguments for the winner; `capacity` defaults to the trial's (pass the worst confirmed one)."""
    cap = trial.capacity if capacity is None else capacity
    engine = get_engine(trial.engine)
    settings = engine.run_settings(study)
    sim = settings if isinstance(settings, SimSettings) else None
    real = settings if isinstance(settings, EngineSettings) else None
    return AppArgs(
        engine=trial.engine,
        model=study.model,
        engine_args=dict(trial.args),
        deployment=deployment_args(study, cap, trial.metrics),
        sim=sim,
        accelerator_type=None if engine.simulated else accelerator_type(hardware(study, trial)),
        start_timeout_s=600.0 if sim is not None else settings.start_timeout_s,
        engine_settings=None if real is None else served_settings(real),
        workdir=None if real is None else (user_dir() or os.getcwd()),
        # output-changing levers travel with the config (served back on GET /servetune)
        lineage={**(lineage or {}), "output_labels": ",".join(trial.labels) or "none",
                 "output_check": trial.output_check or "not recorded"},
    )


def served_settings(settings: EngineSettings) -> EngineSettings:
    """The study's engine settings for the Serve replica (its own server: serve_apps.engine_process),
    without secret-named env values: promoted.yaml is an MLflow artifact; a replica gets those from the
    cluster's environment, as the trial's engine got them from the driver's."""
    env = {k: v for k, v in settings.env.items() if not is_secret_key(k)}
    return settings.model_copy(update={"env": env})


def builder(engine: str) -> str:
    """The Serve builder of an engine, from its home (tuner.engines.<engine>.serve_builder)."""
    path = engine_class(engine).serve_builder
    if path is None:
        raise ValueError(f"engine {engine!r} has no Ray Serve app to promote to")
    return path


def app_config(args: AppArgs, *, name: str, route_prefix: str) -> dict[str, Any]:
    """One entry of a Serve config's `applications` list."""
    return {
        "name": name,
        "route_prefix": route_prefix,
        "import_path": builder(args.engine),
        "args": args.model_dump(mode="json", exclude_none=True),
    }


def serve_config(apps: list[dict[str, Any]], *, host: str = "127.0.0.1", port: int = 8000) -> dict[str, Any]:
    """A whole Serve config file (ServeDeploySchema) with the given applications."""
    return {
        "proxy_location": "EveryNode",
        "http_options": {"host": host, "port": port},
        "applications": apps,
    }


def write_config(config: dict[str, Any], path: Path) -> Path:
    """Atomic write (tuner.common.atomic), so a reader never sees half a config."""
    write_text(path, yaml.safe_dump(config, sort_keys=False))
    return path


def read_app(path: Path, name: str | None = None) -> dict[str, Any]:
    """The application entry of a promoted.yaml (the only one, or the one called `name`)."""
    data = yaml.safe_load(path.read_text())
    apps = data.get("applications") or []
    if name is not None:
        apps = [a for a in apps if a.get("name") == name] or apps
    if not apps:
        raise ValueError(f"{path}: no application in this Serve config")
    return dict(apps[0])


def failover_apps(primary: dict[str, Any], secondary: dict[str, Any], *, name: str, route_prefix: str,
                  proxy_url: str = "http://127.0.0.1:8000") -> list[dict[str, Any]]:
    """Three Serve apps: two promoted configs on their own routes and a failover router on `route_prefix`
    (e.g. the best vLLM config as primary, the best SGLang config as secondary; serve_apps.failover)."""
    base = route_prefix.rstrip("/") or f"/{name}"
    sides = {side: {**app, "name": f"{name}-{side}", "route_prefix": f"{base}-{side}"}
             for side, app in (("primary", primary), ("secondary", secondary))}
    router = {
        "name": name,
        "route_prefix": route_prefix,
        "import_path": "serve_apps.failover:build_app",
        "args": {"primary": sides["primary"]["route_prefix"], "secondary": sides["secondary"]["route_prefix"],
                 "proxy_url": proxy_url},
    }
    return [sides["primary"], sides["secondary"], router]


# Sharing one GPU between the two failover sides (tuner.promote.failover --share-gpu)
MEMORY_KNOB = {"vllm": "gpu_memory_utilization", "sglang": "mem_fraction_static"}
DEFAULT_GPU_SHARE = 0.42  # each side's engine memory; a Qwen3-8B-shaped model (~16 GB) fits twice on an H200
MAX_GPU_SHARE = 0.45  # both sides together at most 0.9 (vLLM's own default for one engine): SGLang's
# activations and CUDA graphs and both CUDA contexts live outside these budgets
RAY_GPU_FRACTION = 0.5  # Ray GPUs per engine GPU for each side: two replicas fit on one GPU


def share_gpu(app: dict[str, Any], share: float) -> tuple[dict[str, Any], dict[str, Any]]:
    """`app` (a promoted Serve app entry) changed to share its one GPU with one other app: its replica asks
    Ray for RAY_GPU_FRACTION of a GPU, and its engine's memory is capped at `share` of the GPU (vLLM
    gpu_memory_utilization, SGLang mem_fraction_static; a smaller tuned value is kept). The change is
    served back in the lineage (GET /servetune). Returns (new entry, what changed); ValueError for a
    config that cannot share (an engine on more than one GPU, an engine without a memory knob)."""
    args = AppArgs.model_validate(app.get("args") or {})
    engine = engine_class(args.engine)
    flavour = args.sim.flavour if args.sim is not None else args.engine
    knob = MEMORY_KNOB.get(flavour)
    if knob is None:
        raise ValueError(f"engine {args.engine!r} has no GPU memory knob to cap (only {sorted(MEMORY_KNOB)})")
    from tuner.spec.levers import gpus

    n = gpus(args.engine_args, args.model.tensor_parallel_size)
    if n != 1:
        raise ValueError(f"its engine runs on {n} GPUs (tensor x data parallel); only one-GPU engines can share a GPU")
    was = args.engine_args.get(knob)
    new = min(float(was), share) if isinstance(was, (int, float)) else share
    change: dict[str, Any] = {"memory_knob": knob, "tuned": was, "deployed": new,
                              "ray_num_gpus": RAY_GPU_FRACTION if engine.uses_gpu else 0}
    how = (f"{knob} {was} kept (not above {share:g})" if was is not None and new == was else
           f"{knob} {'unset (engine default)' if was is None else was} -> {new:g}")
    gpu = f"Ray num_gpus {RAY_GPU_FRACTION:g} (was 1)" if engine.uses_gpu else "no Ray GPU (simulated engine)"
    change["note"] = f"changed to share one GPU with the other failover side: {gpu}, {how}"
    update: dict[str, Any] = {"engine_args": {**args.engine_args, knob: new},
                              "lineage": {**args.lineage, "gpu_sharing": change["note"]}}
    if engine.uses_gpu:
        update["gpu_fraction"] = RAY_GPU_FRACTION
    shared = args.model_copy(update=update)
    return {**app, "args": shared.model_dump(mode="json", exclude_none=True)}, change
