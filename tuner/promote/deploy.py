"""Deploying a promoted config to a running Ray Serve, blue-green, through the dashboard's REST API.

The same API `serve deploy` uses, but merged with what is already deployed (a plain `serve deploy`
of one app would delete every other declaratively deployed app). The new config first runs as a
side app (``<name>-candidate`` on its own route) and must pass the smoke test there; only then is
``<name>`` itself updated, smoke-tested again, and the side app removed. A failure at any step puts
back the apps as they were, so the old staging keeps serving and nothing else changes.
Cost: while switching, the new config runs twice (one extra copy of its resources).

A cluster without room for that copy (one GPU, an engine that takes it whole) deploys in place
instead: the old app is removed (its engine stopped, its GPUs freed), the new one started, smoke-tested
and checked; a failure puts the old one back the same way. Serving stops during the switch.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tuner.promote.smoke import SmokeResult, SmokeTestError, smoke_test

if TYPE_CHECKING:
    from tuner.promote.canary import CanaryResult

# A check of the switched app under load (the canary): (Serve HTTP base, route prefix) -> verdict
Check = Callable[[str, str], "CanaryResult"]

DEFAULT_DASHBOARD = "http://127.0.0.1:8265"


class DeployError(Exception):
    """An app did not reach RUNNING (failed to deploy, or not in time)."""


@dataclass
class DeployResult:
    ok: bool
    reason: str
    smoke: SmokeResult | None = None
    canary: CanaryResult | None = None
    rolled_back: bool = False  # the new config served, failed its check, and the old one was put back


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


class ServeAdmin:
    """The running Serve instance as seen through the dashboard: read apps, apply apps, wait for them."""

    def __init__(self, address: str = DEFAULT_DASHBOARD, *, default_http_port: int = 8000,
                 headers: dict[str, str] | None = None) -> None:
        """`headers`: extra HTTP headers; a cluster's auth token is otherwise read as Ray reads it
        (RAY_AUTH_TOKEN / RAY_AUTH_TOKEN_PATH with RAY_AUTH_MODE=token)."""
        from ray.dashboard.modules.serve.sdk import ServeSubmissionClient

        self.client = ServeSubmissionClient(address, headers=headers)
        self.default_http_port = default_http_port

    def details(self) -> dict[str, Any]:
        return self.client.get_serve_details()

    def declared_apps(self) -> dict[str, dict[str, Any]]:
        """Apps deployed from config (declaratively), by name, as they were submitted."""
        apps = self.details().get("applications") or {}
        return {name: dict(app["deployed_app_config"]) for name, app in apps.items()
                if app.get("source") == "declarative" and app.get("deployed_app_config")}

    def apply(self, apps: dict[str, dict[str, Any]], http_options: dict[str, Any] | None = None) -> None:
        """Make the declaratively deployed apps exactly `apps`, keeping the running HTTP settings
        (`http_options` only matter when Serve is not running yet)."""
        details = self.details()
        config: dict[str, Any] = {"applications": list(apps.values())}
        running = details.get("http_options") if details.get("controller_info") else None  # Serve is up
        config["http_options"] = running or http_options or {"host": "127.0.0.1", "port": self.default_http_port}
        if details.get("proxy_location"):
            config["proxy_location"] = details["proxy_location"]
        self.client.deploy_applications(config)

    def http_base(self) -> str:
        http = self.details().get("http_options") or {}  # read after a deploy: Serve is up
        host = http.get("host") or "127.0.0.1"
        host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        return f"http://{host}:{http.get('port') or self.default_http_port}"

    def wait_running(self, name: str, app: dict[str, Any], timeout_s: float) -> None:
        """Until app `name` runs this exact config; DeployError on DEPLOY_FAILED or at the deadline."""
        deadline = time.monotonic() + timeout_s
        status, message = "NOT_STARTED", ""
        while time.monotonic() < deadline:
            info = (self.details().get("applications") or {}).get(name)
            if info is not None:
                deployed = info.get("deployed_app_config") or {}
                current = _same(deployed.get("args"), app.get("args")) and \
                    deployed.get("import_path") == app.get("import_path")
                status, message = info.get("status", ""), info.get("message", "")
                if current and status == "RUNNING":
                    return
                if current and status == "DEPLOY_FAILED":
                    raise DeployError(f"app {name!r} failed to deploy: {_short(message)}{_why(info)}")
            time.sleep(1.0)
        raise DeployError(f"app {name!r} not RUNNING after {timeout_s:g}s (status {status}: {_short(message)})")

    def wait_gone(self, name: str, timeout_s: float) -> None:
        """Until app `name` no longer exists (deleting an app drains its replicas first)."""
        deadline = time.monotonic() + timeout_s
        while name in (self.details().get("applications") or {}):
            if time.monotonic() > deadline:
                raise DeployError(f"app {name!r} still exists after {timeout_s:g}s")
            time.sleep(1.0)


def _why(info: dict[str, Any]) -> str:
    """The failing deployments' own last error line (e.g. the engine's start failure)."""
    lines = []
    for dep_name, dep in (info.get("deployments") or {}).items():
        text = [ln.strip() for ln in str(dep.get("message") or "").splitlines() if ln.strip()]
        if text and dep.get("status") not in ("HEALTHY", "UPDATING"):
            lines.append(f"{dep_name}: {text[-1]}")
    return (" | " + "; ".join(lines)) if lines else ""


def _short(message: str, limit: int = 600) -> str:
    message = " ".join(message.split())
    return message if len(message) <= limit else "..." + message[-limit:]


def candidate_route(name: str, route_prefix: str) -> tuple[str, str]:
    """Name and route of the side app a new config is tried on first."""
    cand = f"{name}-candidate"
    prefix = route_prefix.rstrip("/")
    return cand, (f"{prefix}-candidate" if prefix else f"/{cand}")


def served_model(app: dict[str, Any]) -> str:
    model = (app.get("args") or {}).get("model") or {}
    return model.get("served_name") or model.get("name") or "default"


def deploy_blue_green(admin: ServeAdmin, app: dict[str, Any], *, name: str, route_prefix: str,
                      timeout_s: float = 600, smoke_timeout_s: float = 120,
                      http_options: dict[str, Any] | None = None, check: Check | None = None) -> DeployResult:
    """Deploy `app` (an entry of a Serve config) as `name` only if it passes the smoke test first; with
    `check` (the canary), the switched app must also pass it, else the previous `name` is put back."""
    t0 = time.monotonic()
    cand_name, cand_prefix = candidate_route(name, route_prefix)
    try:
        admin.wait_gone(cand_name, timeout_s)  # a side app from an earlier deploy may still be shutting down
    except DeployError as exc:
        return DeployResult(False, f"{name!r} left as it was: {exc}")
    before = admin.declared_apps()
    base = {k: v for k, v in before.items() if k != cand_name}
    cand = {**app, "name": cand_name, "route_prefix": cand_prefix}
    model = served_model(app)
    admin.apply({**base, cand_name: cand}, http_options)
    try:
        admin.wait_running(cand_name, cand, timeout_s)
        smoke_test(admin.http_base(), cand_prefix, model, timeout_s=smoke_timeout_s)
    except (DeployError, SmokeTestError) as exc:
        admin.apply(base)  # drop the candidate; `name` was never touched
        return DeployResult(False, f"candidate rejected, {name!r} left as it was: {exc}")
    new = {**app, "name": name, "route_prefix": route_prefix}
    admin.apply({**base, cand_name: cand, name: new})
    try:
        admin.wait_running(name, new, timeout_s)
        smoke = smoke_test(admin.http_base(), route_prefix, model, timeout_s=smoke_timeout_s)
    except (DeployError, SmokeTestError) as exc:
        admin.apply(base)  # put the previous `name` back (or remove it if there was none)
        if name in base:
            admin.wait_running(name, base[name], timeout_s)
        return DeployResult(False, f"{name!r} failed after the switch and was restored: {exc}")
    admin.apply({**base, name: new})  # the candidate shuts down in the background (its resources freed)
    done = (f"{name!r} serves the new config after {time.monotonic() - t0:.0f}s; smoke test passed (first token "
            f"{smoke.ttft_s * 1000:.0f} ms)")
    return _canaried(check, admin.http_base(), route_prefix, done, smoke,
                     lambda: _restore(admin, base, name, timeout_s, smoke_timeout_s))


def deploy_in_place(admin: ServeAdmin, app: dict[str, Any], *, name: str, route_prefix: str,
                    timeout_s: float = 600, smoke_timeout_s: float = 120,
                    http_options: dict[str, Any] | None = None, check: Check | None = None) -> DeployResult:
    """Replace `name` by `app` without a side copy (for a cluster with room for one engine): stop the old
    app, start the new one, smoke test and `check` it; a failure puts the previous `name` back."""
    t0 = time.monotonic()
    before = admin.declared_apps()
    base = {k: v for k, v in before.items() if k != name}
    new = {**app, "name": name, "route_prefix": route_prefix}
    if name in before:
        admin.apply(base, http_options)
        try:
            admin.wait_gone(name, timeout_s)  # its replicas drained and its engine stopped: resources free
        except DeployError as exc:
            admin.apply(before)
            return DeployResult(False, f"{name!r} left as it was: {exc}")
    admin.apply({**base, name: new}, http_options)
    try:
        admin.wait_running(name, new, timeout_s)
        smoke = smoke_test(admin.http_base(), route_prefix, served_model(app), timeout_s=smoke_timeout_s)
    except (DeployError, SmokeTestError) as exc:
        restored = _restore(admin, before, name, timeout_s, smoke_timeout_s, replace=True)
        return DeployResult(False, f"{name!r} failed in place: {exc}; {restored}")
    done = (f"{name!r} serves the new config after {time.monotonic() - t0:.0f}s (in place); smoke test passed "
            f"(first token {smoke.ttft_s * 1000:.0f} ms)")
    return _canaried(check, admin.http_base(), route_prefix, done, smoke,
                     lambda: _restore(admin, before, name, timeout_s, smoke_timeout_s, replace=True))


def _canaried(check: Check | None, http_base: str, route_prefix: str, done: str, smoke: SmokeResult,
              restore: Callable[[], str]) -> DeployResult:
    """The deployed app after its smoke test: no check -> done; a canary that passes -> done with its
    figures; one that misses -> `restore` (each deploy mode puts the previous app back its own way)."""
    if check is None:
        return DeployResult(True, done, smoke)
    canary = _checked(check, http_base, route_prefix)
    if canary.passed:
        return DeployResult(True, f"{done}; {canary.reason}", smoke, canary)
    return DeployResult(False, f"{canary.reason}; rolled back: {restore()}", smoke, canary, rolled_back=True)


def _checked(check: Check, http_base: str, route_prefix: str) -> CanaryResult:
    """The check's verdict; a check that raises is a failed check (its error is the reason)."""
    try:
        return check(http_base, route_prefix)
    except Exception as exc:  # noqa: BLE001 -- any failure of the canary must roll back, not crash
        from tuner.promote.canary import failed_canary

        return failed_canary(f"canary could not run: {type(exc).__name__}: {exc}")


def _restore(admin: ServeAdmin, base: dict[str, dict[str, Any]], name: str, timeout_s: float,
             smoke_timeout_s: float, *, replace: bool = False) -> str:
    """Put the apps back as they were before the deploy; say what `name` serves now. `replace`: stop the
    failed `name` first (in place: no room for it and the previous config at once)."""
    if replace and name in base:
        admin.apply({k: v for k, v in base.items() if k != name})
        try:
            admin.wait_gone(name, timeout_s)
        except DeployError as exc:
            return f"the failed config of {name!r} did not stop: {exc}"
    admin.apply(base)
    if name not in base:
        admin.wait_gone(name, timeout_s)
        return f"{name!r} removed (there was no previous config)"
    try:
        admin.wait_running(name, base[name], timeout_s)
        smoke_test(admin.http_base(), base[name]["route_prefix"], served_model(base[name]), timeout_s=smoke_timeout_s)
    except (DeployError, SmokeTestError) as exc:
        return f"the previous config of {name!r} was re-applied but is not serving yet: {exc}"
    lineage = (base[name].get("args") or {}).get("lineage") or {}
    version = f" (version {lineage['model_version']})" if lineage.get("model_version") else ""
    return f"{name!r} serves the previous config again{version}, smoke test passed"
