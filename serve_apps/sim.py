"""The simulated engine as a Ray Serve app: each replica owns one `tuner.sim.server` process.

Why a child process and a proxy rather than the simulator inside the replica: the replica then runs
exactly the server a trial measured (same argv from tuner.engines' SimEngine, same fault switches),
and a crash of the engine is a failed health check that Serve answers by replacing the replica,
as with a real engine. The child runs in its own process group with a reaper, so it dies with the
replica (tuner.engines.process.ServerProcess).

    serve run promoted.yaml        # import_path: serve_apps.sim:build_app
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from ray import serve
from ray.serve.deployment import Application
from starlette.requests import Request
from starlette.responses import Response

from serve_apps.args import AppArgs, parse_args
from serve_apps.proxy import Upstream, sub_path


@serve.deployment(name="SimEngine")
class SimServer:
    """One replica: start the sim server, wait until ready, proxy the OpenAI API to it."""

    def __init__(self, args: dict[str, Any]) -> None:
        from tuner.engines import get_engine
        from tuner.engines.base import LaunchSpec
        from tuner.engines.process import reserve_port

        self.args = parse_args(args)
        assert self.args.sim is not None  # AppArgs guarantees it for engine "sim"
        engine = get_engine("sim")
        port, sock = reserve_port("127.0.0.1")
        log_path = Path(tempfile.mkdtemp(prefix="servetune-sim-replica-")) / "engine.log"
        launch = LaunchSpec(model=self.args.model, host="127.0.0.1", port=port, log_path=log_path,
                            settings=self.args.sim)
        self.proc = engine.server(self.args.engine_args, launch, port_socket=sock)
        self.proc.ready_timeout_s = self.args.start_timeout_s
        self.proc.__enter__()  # raises EngineStartError with the engine's own words; Serve reports it
        self.upstream = Upstream(self.proc.base_url)

    async def __call__(self, request: Request) -> Response:
        if sub_path(request) == "/servetune":
            return Response(json.dumps(describe(self.args)), media_type="application/json")
        return await self.upstream.forward(request)

    async def check_health(self) -> None:
        """Serve calls this periodically; a dead or hung engine makes the replica unhealthy (and replaced)."""
        if not self.proc.alive():
            raise RuntimeError(f"sim engine exited ({self.proc.returncode}): {self.proc.log_tail(5)}")
        status = await self.upstream.get_status("/health", timeout_s=10)
        if status != 200:
            raise RuntimeError(f"sim engine /health answered {status or 'nothing'} within 10s")

    def __del__(self) -> None:
        proc = getattr(self, "proc", None)
        if proc is not None:
            proc.stop()


def describe(args: AppArgs) -> dict[str, Any]:
    """What this app serves, for people and smoke tests: engine, tuned args, lineage."""
    return {"engine": args.engine, "model": args.model.client_name, "engine_args": args.engine_args,
            "lineage": args.lineage}


def build_app(args: dict[str, Any]) -> Application:
    """Serve builder (import path ``serve_apps.sim:build_app``) for a promoted sim config."""
    parsed = parse_args(args)
    if parsed.engine != "sim":
        raise ValueError(f"serve_apps.sim builds engine 'sim' apps, got {parsed.engine!r}")
    options = parsed.deployment.serve_options()
    # serve.deployment adds .options(), which the type checker does not see
    server = SimServer.options(**options, ray_actor_options={"num_cpus": parsed.deployment.num_cpus})  # type: ignore[attr-defined]
    return server.bind(parsed.model_dump(mode="json"))
