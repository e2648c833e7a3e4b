"""A health-checked failover router in front of two OpenAI-compatible Serve apps (the seeds' ops advice).

Typical use: the best vLLM config as primary and the best SGLang config as secondary, each its own
Serve app (any of our builders), plus this router as a third app on the public route. It talks to
the two apps through the Serve HTTP proxy of its node, so it works the same for every engine.

- Health: every `health_period_s` it asks each side for ``/v1/models``; `failures_to_trip`
  failed requests in a row, or as many failed probes in a row, take that side out for
  `retry_after_s`. A good probe clears only failed probes: a server can list its models while
  every completion fails, so it neither resets failed requests nor brings a tripped side back.
- Requests go to the primary while it is in; an answer of 5xx or no answer at all (before any byte
  reached the client) is retried once on the other side and counts as a failure.
- Every answer says who served it in the header ``x-servetune-backend``.

Config (see tuner.promote.serve_config.failover_apps):

    import_path: serve_apps.failover:build_app
    args: {primary: /staging-primary, secondary: /staging-secondary, proxy_url: http://127.0.0.1:8000}
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import aiohttp
from pydantic import BaseModel, ConfigDict, Field
from ray import serve
from ray.serve.deployment import Application
from starlette.requests import Request
from starlette.responses import Response

from serve_apps.proxy import Upstream, error_response, relay, sub_path

SIDES = ("primary", "secondary")


class FailoverArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    primary: str = Field(pattern=r"^/")  # route prefix of the primary app
    secondary: str = Field(pattern=r"^/")
    proxy_url: str = "http://127.0.0.1:8000"  # the Serve HTTP proxy as seen from the router's node
    health_period_s: float = Field(default=5.0, gt=0)
    health_timeout_s: float = Field(default=5.0, gt=0)
    failures_to_trip: int = Field(default=3, gt=0)
    retry_after_s: float = Field(default=30.0, gt=0)
    answer_timeout_s: float = Field(default=60.0, gt=0)  # no response head from a side in this time: failed


class SideState:
    """Consecutive failures, counted apart for requests and probes, and the time a tripped side
    may be tried again.

    Two counts, because a good probe says nothing about completions: a server can list its models
    while every completion fails, and a probe landing between sparse failed requests must not
    reset their count (it did, and the side then never tripped)."""

    def __init__(self) -> None:
        self.request_failures = 0
        self.probe_failures = 0
        self.out_until = 0.0

    @property
    def failures(self) -> int:
        return max(self.request_failures, self.probe_failures)

    @property
    def healthy(self) -> bool:
        return time.monotonic() >= self.out_until

    def failed(self, trip: int, retry_after_s: float, *, probe: bool = False) -> None:
        if probe:
            self.probe_failures += 1
        else:
            self.request_failures += 1
        if self.failures >= trip:
            self.out_until = time.monotonic() + retry_after_s

    def ok(self) -> None:
        """A good answer: the side serves, so every count and any trip are cleared."""
        self.request_failures, self.probe_failures, self.out_until = 0, 0, 0.0

    def probe_ok(self) -> None:
        """A good probe clears only the probe count; neither request failures nor a trip."""
        self.probe_failures = 0


@serve.deployment(name="Failover", max_ongoing_requests=1000)
class FailoverRouter:
    def __init__(self, args: dict[str, Any]) -> None:
        self.args = FailoverArgs.model_validate(args)
        base = self.args.proxy_url.rstrip("/")
        self.up = {s: Upstream(base + getattr(self.args, s).rstrip("/")) for s in SIDES}
        self.state = {s: SideState() for s in SIDES}
        self._watch: asyncio.Task[None] | None = None

    def order(self) -> list[str]:
        """Primary first unless it is tripped (and the secondary is not)."""
        p, s = self.state["primary"], self.state["secondary"]
        return ["secondary", "primary"] if not p.healthy and s.healthy else ["primary", "secondary"]

    async def __call__(self, request: Request) -> Response:
        if self._watch is None:
            self._watch = asyncio.get_running_loop().create_task(self._health_loop())
        if sub_path(request) == "/servetune/failover":
            return Response(json.dumps(self.describe()), media_type="application/json")
        body = await request.body()
        order = self.order()
        for i, side in enumerate(order):
            last = i == len(order) - 1
            try:
                upstream = await asyncio.wait_for(self.up[side].open(request, body), self.args.answer_timeout_s)
            except (aiohttp.ClientError, TimeoutError) as exc:
                self._failed(side)
                if last:
                    return error_response(502, f"both sides failed; {side}: {type(exc).__name__}: {exc}")
                continue
            if upstream.status >= 500 and not last:
                upstream.release()
                self._failed(side)
                continue
            if upstream.status < 500:
                self.state[side].ok()
            return await relay(upstream, {"x-servetune-backend": side})
        return error_response(502, "no backend")  # not reached: the loop returns on its last side

    def _failed(self, side: str, *, probe: bool = False) -> None:
        self.state[side].failed(self.args.failures_to_trip, self.args.retry_after_s, probe=probe)

    async def _health_loop(self) -> None:
        while True:
            for side in SIDES:
                status = await self.up[side].get_status("/v1/models", self.args.health_timeout_s)
                if status == 200:
                    self.state[side].probe_ok()
                else:
                    self._failed(side, probe=True)
            await asyncio.sleep(self.args.health_period_s)

    def describe(self) -> dict[str, Any]:
        return {s: {"route": getattr(self.args, s), "healthy": self.state[s].healthy,
                    "failures": self.state[s].failures,
                    "request_failures": self.state[s].request_failures,
                    "probe_failures": self.state[s].probe_failures} for s in SIDES}


def build_app(args: dict[str, Any]) -> Application:
    """Serve builder (import path ``serve_apps.failover:build_app``)."""
    parsed = FailoverArgs.model_validate(args)
    router = FailoverRouter.options(ray_actor_options={"num_cpus": 0.1})  # type: ignore[attr-defined]
    return router.bind(parsed.model_dump())
