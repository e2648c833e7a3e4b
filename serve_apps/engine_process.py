"""Any engine as a Ray Serve app whose replica runs the engine's own OpenAI server as a child process.

Why a child process and a proxy rather than an engine inside the replica: the replica then runs
exactly the server a trial measured (the same argv from `tuner.engines`, the same environment), so it
needs no Ray Serve LLM integration of the installed engine version (Ray 2.60's `ray.serve.llm` is
written for vLLM 0.29; an engine lock on 0.26 cannot load it). A crash of the engine is a failed
health check, which Serve answers by replacing the replica, as with an in-process engine. The child
binds 127.0.0.1 on a free port, runs in its own process group with a reaper (it dies with the
replica; `tuner.engines.process.ServerProcess`), and is stopped (GPU memory back) on shutdown.

Used by ``serve_apps.sim`` always, and by ``serve_apps.vllm`` / ``serve_apps.sglang`` when
``server: process`` is set or Ray Serve LLM cannot load the installed engine (``server: auto``).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from ray import serve
from ray.serve.deployment import Application
from starlette.requests import Request
from starlette.responses import Response

from serve_apps.args import AppArgs, parse_args
from serve_apps.proxy import Upstream, sub_path

HEALTH_TIMEOUT_S = 10.0


@serve.deployment(name="EngineServer")
class EngineServer:
    """One replica: start the engine's server, wait until ready, proxy the OpenAI API to it."""

    def __init__(self, args: dict[str, Any]) -> None:
        from tuner.engines import get_engine
        from tuner.engines.base import LaunchSpec
        from tuner.engines.process import reserve_port

        self.args = parse_args(args)
        if self.args.workdir:  # relative model and interpreter paths mean what they meant to the study
            os.environ.setdefault("TUNE_ORIG_WORKING_DIR", self.args.workdir)
        engine = get_engine(self.args.engine)
        port, sock = reserve_port("127.0.0.1")
        log_dir = Path(tempfile.mkdtemp(prefix=f"servetune-{self.args.engine}-replica-"))
        # a shared GPU (gpu_fraction) is never free while the other app runs: stop() must not wait for it
        gpu_ids = [] if self.args.gpu_fraction else _ray_gpu_ids()
        launch = LaunchSpec(model=self.args.model, host="127.0.0.1", port=port, log_path=log_dir / "engine.log",
                            settings=launch_settings(self.args), gpu_ids=gpu_ids)
        self.proc = engine.server(self.args.engine_args, launch, port_socket=sock)
        self.proc.ready_timeout_s = self.args.start_timeout_s
        self.proc.__enter__()  # raises EngineStartError with the engine's own words; Serve reports it
        self.upstream = Upstream(self.proc.base_url)

    async def __call__(self, request: Request) -> Response:
        if sub_path(request) == "/servetune":
            about = {**describe(self.args), "engine_pid": self.proc.pid, "engine_log": str(self.proc.log_path)}
            return Response(json.dumps(about), media_type="application/json")
        return await self.upstream.forward(request)

    async def check_health(self) -> None:
        """Serve calls this periodically; a dead or hung engine makes the replica unhealthy (and replaced)."""
        if not self.proc.alive():
            raise RuntimeError(f"{self.args.engine} engine exited ({self.proc.returncode}): {self.proc.log_tail(5)}")
        status = await self.upstream.get_status("/health", timeout_s=HEALTH_TIMEOUT_S)
        if status != 200:
            raise RuntimeError(f"{self.args.engine} engine /health answered {status or 'nothing'} "
                               f"within {HEALTH_TIMEOUT_S:g}s")

    def __del__(self) -> None:
        """Serve's graceful shutdown: stop the engine's whole process group (and wait for its GPUs)."""
        proc = getattr(self, "proc", None)
        if proc is not None:
            proc.stop()


def launch_settings(args: AppArgs) -> Any:
    """The sim's settings, the promoted engine settings, or the engine's defaults."""
    from tuner.spec.study import EngineSettings

    if args.sim is not None:
        return args.sim
    return args.engine_settings or EngineSettings()


def _ray_gpu_ids() -> list[int]:
    """The GPUs Ray gave this replica (so the engine sees them and stop() waits until they are free)."""
    import ray

    try:
        return [int(g) for g in ray.get_gpu_ids()]
    except (ValueError, TypeError, RuntimeError):
        return []


def describe(args: AppArgs) -> dict[str, Any]:
    """What this app serves, for people and smoke tests: engine, tuned args, lineage."""
    return {"engine": args.engine, "model": args.model.client_name, "engine_args": args.engine_args,
            "lineage": args.lineage, "server": "process"}


def replica_gpus(args: AppArgs, cluster_gpus: float) -> float:
    """GPUs one replica holds, as a trial held them (tuner.run.resources): the engine's layout (tensor x
    data parallel) on a cluster with GPUs, times `gpu_fraction` when the app shares its GPU; none for a
    CPU engine or a cluster without GPUs (vLLM on CPU)."""
    from tuner.engines import engine_class
    from tuner.spec.levers import gpus

    if not engine_class(args.engine).uses_gpu or cluster_gpus <= 0:
        return 0
    n = gpus(args.engine_args, args.model.tensor_parallel_size)
    return n * args.gpu_fraction if args.gpu_fraction else n


def _cluster_gpus() -> float:
    """GPUs of the Ray cluster the app is built on (Serve builds it in a task: Ray is up)."""
    import ray

    return float(ray.cluster_resources().get("GPU", 0)) if ray.is_initialized() else 0.0


def build(args: AppArgs, cluster_gpus: float | None = None) -> Application:
    """The process app for validated args: Serve options from the measured capacity, GPUs from the layout
    (`cluster_gpus`: the Ray cluster's GPUs, read from Ray when not given)."""
    actor: dict[str, Any] = {"num_cpus": args.deployment.num_cpus}
    n_gpus = replica_gpus(args, _cluster_gpus() if cluster_gpus is None else cluster_gpus)
    if n_gpus:
        actor["num_gpus"] = n_gpus
    # serve.deployment adds .options(), which the type checker does not see
    server = EngineServer.options(**args.deployment.serve_options(), ray_actor_options=actor)  # type: ignore[attr-defined]
    return server.bind(args.model_dump(mode="json"))
