"""`python -m tuner.promote.failover`: serve a promoted pair behind the failover router, and show it.

    python -m tuner.promote.failover --primary A --secondary B [--mlflow-uri URI] [--name ha]
                                     [--route /ha] [--kill-primary] [--requests N] [--exclusive]
                                     [--share-gpu [F]] [--report FILE]

A and B are each a promoted.yaml (a Serve config file) or a registered config (``<study>-config``,
its ``staging`` version; ``NAME:VERSION`` for another one). Three apps are deployed
(tuner.promote.serve_config.failover_apps): ``<name>-primary``, ``<name>-secondary`` and the router
(serve_apps.failover) on `--route`. Then N streaming chat completions go through the router and
each prints the side that answered (header ``x-servetune-backend``). With `--kill-primary`, every
replica process of the primary app is killed (SIGKILL, as a crashed engine) and N more completions
go through the router: they must all succeed, answered by the secondary.

`--share-gpu [F]` (a host with one GPU): each side's replica asks Ray for half a GPU and its engine's
memory is capped at F of the GPU (default 0.42; vLLM gpu_memory_utilization, SGLang
mem_fraction_static, lowered only), and the secondary starts only once the primary runs (holds its
memory: two engines starting at once would both size themselves to the same free memory). What was
changed is printed, served on each side's GET /servetune (lineage.gpu_sharing) and in the report.

Exit status: 0 shown (and with --kill-primary, traffic moved to the secondary with no failed
request); 1 deploy failed, a request failed, or traffic did not move; 2 invalid input.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

from tuner.common.errors import SpecError
from tuner.common.procs import descendants
from tuner.promote.serve_config import DEFAULT_GPU_SHARE, MAX_GPU_SHARE

DASHBOARD_ENV = "RAY_DASHBOARD_ADDRESS"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tuner.promote.failover", description=__doc__.splitlines()[0])
    p.add_argument("--primary", required=True, metavar="CONFIG", help="promoted.yaml, or NAME[:VERSION] registered")
    p.add_argument("--secondary", required=True, metavar="CONFIG", help="promoted.yaml, or NAME[:VERSION] registered")
    p.add_argument("--mlflow-uri", metavar="URI", help="tracking URI for registered names (default: "
                   "$MLFLOW_TRACKING_URI)")
    p.add_argument("--name", default="failover", help="router app name (sides: NAME-primary, NAME-secondary)")
    p.add_argument("--route", default="/failover", help="the router's route prefix")
    p.add_argument("--address", metavar="URL", help=f"Ray dashboard (default: ${DASHBOARD_ENV} or "
                   "http://127.0.0.1:8265)")
    p.add_argument("--requests", type=int, default=3, metavar="N", help="completions before (and after) the kill")
    p.add_argument("--kill-primary", action="store_true", help="kill the primary's replica processes, stream again")
    p.add_argument("--exclusive", action="store_true", help="remove the other declared apps first (e.g. staging, "
                   "to free its GPU)")
    p.add_argument("--keep", action="store_true", help="leave the three apps running at the end")
    p.add_argument("--timeout", type=float, default=900, metavar="S", help="deploy deadline")
    p.add_argument("--share-gpu", type=float, nargs="?", const=DEFAULT_GPU_SHARE, metavar="F",
                   help=f"run both sides on one GPU: half a GPU each in Ray, engine memory capped at F of the GPU "
                        f"(default {DEFAULT_GPU_SHARE}; at most {MAX_GPU_SHARE}), secondary started after the primary")
    p.add_argument("--report", type=Path, metavar="FILE", help="also write the result as JSON to FILE")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    try:
        if args.requests < 1:
            raise SpecError(f"--requests must be >= 1, got {args.requests}", "--requests", "give e.g. 3")
        if not args.route.startswith("/") or args.route.endswith("/"):
            raise SpecError(f"route {args.route!r} must start with '/' and not end with it", "--route",
                            "write e.g. --route /failover")
        share = args.share_gpu
        if share is not None and not 0 < share <= MAX_GPU_SHARE:
            raise SpecError(f"--share-gpu {share}: each side's engine memory share must be > 0 and <= "
                            f"{MAX_GPU_SHARE} of the GPU (both sides together at most {2 * MAX_GPU_SHARE:g}; "
                            f"activations, CUDA graphs and contexts need the rest)", "--share-gpu",
                            f"give e.g. --share-gpu {DEFAULT_GPU_SHARE} (the default when F is left out)")
        primary, secondary = _app(args, args.primary, "--primary"), _app(args, args.secondary, "--secondary")
        sharing: dict[str, Any] = {}
        if share is not None:
            primary, sharing["primary"] = _shared(primary, share, "--primary", args.primary)
            secondary, sharing["secondary"] = _shared(secondary, share, "--secondary", args.secondary)
            for side, change in sharing.items():
                print(f"{side} {change['note']}")
        from tuner.promote.__main__ import admin_for

        admin = admin_for(args.address)
        return _show(args, admin, primary, secondary, sharing)
    except SpecError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _app(args: argparse.Namespace, ref: str, where: str) -> dict[str, Any]:
    """The Serve application entry named by `ref`: a promoted.yaml, or a registered config's version."""
    from tuner.promote.serve_config import read_app

    path = Path(ref)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.is_file():
            raise SpecError(f"no such Serve config file: {ref}", where, "give a promoted.yaml or NAME[:VERSION]")
        try:
            return read_app(path)
        except (ValueError, OSError, AttributeError) as exc:
            raise SpecError(f"{ref}: not a Serve config ({exc})", where, "give the promoted.yaml a study wrote") from None
    uri = args.mlflow_uri or os.environ.get("MLFLOW_TRACKING_URI")
    if not uri:
        raise SpecError(f"{ref!r} is not a file, and no MLflow URI to find it as a registered config", "--mlflow-uri",
                        "pass --mlflow-uri (e.g. sqlite:///runs/study/mlflow.db) or a promoted.yaml path")
    from tuner.promote.ops import version_config
    from tuner.promote.registry import STAGING, ConfigRegistry

    registry = ConfigRegistry(uri)
    name, _, version = ref.partition(":")
    try:
        mv = registry.get(name, version) if version else registry.version(name, STAGING)
    except Exception as exc:  # noqa: BLE001 -- MLflow's not-found and bad-name errors alike
        raise SpecError(f"no registered config {ref!r} ({type(exc).__name__})", where,
                        "give <study>-config or <study>-config:VERSION as listed in the MLflow registry") from None
    if mv is None:
        raise SpecError(f"registered config {name!r} has no {STAGING!r} version", where,
                        "promote one first, or give NAME:VERSION")
    app, _http = version_config(registry, mv)
    return app


def _shared(app: dict[str, Any], share: float, where: str, ref: str) -> tuple[dict[str, Any], dict[str, Any]]:
    from tuner.promote.serve_config import share_gpu

    try:
        return share_gpu(app, share)
    except ValueError as exc:
        raise SpecError(f"{ref} cannot share one GPU: {exc}", where,
                        "give a one-GPU config of vLLM or SGLang, or drop --share-gpu (one GPU per side)") from None


def _show(args: argparse.Namespace, admin: Any, primary: dict[str, Any], secondary: dict[str, Any],
          sharing: dict[str, Any]) -> int:
    from tuner.promote.deploy import DeployError, served_model
    from tuner.promote.serve_config import failover_apps

    base = admin.http_base() if admin.details().get("controller_info") else "http://127.0.0.1:8000"
    apps = failover_apps(primary, secondary, name=args.name, route_prefix=args.route, proxy_url=base)
    keep = {} if args.exclusive else {k: v for k, v in admin.declared_apps().items() if k not in
                                      {a["name"] for a in apps}}
    # On a shared GPU the secondary starts once the primary runs: its engine then sizes itself to the
    # memory the primary's left (the process app is RUNNING only after its engine answered /health)
    stages = [apps[:1], apps] if sharing else [apps]
    report: dict[str, Any] = {"ok": False, "gpu_sharing": sharing or None}
    t0, done = time.monotonic(), set[str]()
    try:
        for stage in stages:
            new = [a for a in stage if a["name"] not in done]
            if len(stages) > 1:
                print(f"deploying {', '.join(a['name'] for a in new)}" + (" (the primary runs)" if done else ""))
            admin.apply({**keep, **{a["name"]: a for a in stage}})
            for app in new:
                admin.wait_running(app["name"], app, args.timeout)
            done |= {a["name"] for a in new}
    except DeployError as exc:
        print(f"failover deploy failed: {exc}")
        report["error"] = f"deploy failed: {exc}"
        _write_report(args.report, report)
        return 1
    report["deploy_s"] = round(time.monotonic() - t0, 1)
    base = admin.http_base()
    print(f"deployed: {args.name} on {args.route} (primary {_what(primary)} on {apps[0]['route_prefix']}, "
          f"secondary {_what(secondary)} on {apps[1]['route_prefix']}) in {time.monotonic() - t0:.0f}s")
    model = served_model(primary)
    before = _stream_n(base, args.route, model, args.requests, "before")
    ok = all(b.get("backend") == "primary" for b in before)
    report["before"] = [b.get("backend") or b.get("error") for b in before]
    if args.kill_primary:
        killed = kill_replicas(admin, apps[0]["name"])
        print(f"killed the primary's engine process(es): {', '.join(map(str, killed)) or 'none found'}")
        after = _stream_n(base, args.route, model, args.requests, "after kill")
        report["killed_pids"] = killed
        report["after"] = [b.get("backend") or b.get("error") for b in after]
        ok = ok and bool(killed) and all(b.get("backend") == "secondary" for b in after)
    state = _get_json(f"{base}{args.route}/servetune/failover")
    report["router_state"] = state
    print(f"router state: {json.dumps(state)}")
    if not args.keep:
        admin.apply({k: v for k, v in admin.declared_apps().items() if k not in {a["name"] for a in apps}})
    verdict = "traffic moved to the secondary" if args.kill_primary else "served by the primary"
    report["ok"] = ok
    print(("ok: " if ok else "FAILED: ") + verdict + f"; {json.dumps(report)}")
    _write_report(args.report, report)
    return 0 if ok else 1


def _write_report(path: Path | None, report: dict[str, Any]) -> None:
    if path is not None:
        from tuner.common.atomic import write_text

        write_text(path, json.dumps(report, indent=2, default=str))


def _what(app: dict[str, Any]) -> str:
    args = app.get("args") or {}
    lineage = args.get("lineage") or {}
    version = f" {lineage['model_name']} v{lineage['model_version']}" if lineage.get("model_version") else ""
    return f"{args.get('engine', '?')}{version}"


def _stream_n(base: str, route: str, model: str, n: int, when: str) -> list[dict[str, Any]]:
    from tuner.promote.smoke import SmokeTestError, smoke_test

    out: list[dict[str, Any]] = []
    for i in range(n):
        try:
            r = smoke_test(base, route, model, max_tokens=8, timeout_s=120)
            out.append({"backend": r.backend, "ttft_ms": round(r.ttft_s * 1000, 1)})
            print(f"  {when} #{i + 1}: answered by {r.backend}, first token {r.ttft_s * 1000:.0f} ms, "
                  f"{r.text!r}")
        except SmokeTestError as exc:
            out.append({"error": str(exc)[:300]})
            print(f"  {when} #{i + 1}: FAILED {exc}")
    return out


def kill_replicas(admin: Any, app_name: str) -> list[int]:
    """SIGKILL the engine processes of every running replica of `app_name` on this host, as an engine
    crash ends them (the replica's child processes: the sim server, vLLM's engine core; the replica
    itself when the engine runs inside it). The replica then answers 5xx until Serve's health check
    replaces it; killing the replica process instead would make Serve queue requests for the new one.
    Replicas on other nodes are named and skipped."""
    local = {"127.0.0.1", "localhost", socket.gethostname()}
    try:
        local.add(socket.gethostbyname(socket.gethostname()))
    except OSError:
        pass
    killed = []
    app = (admin.details().get("applications") or {}).get(app_name) or {}
    for dep in (app.get("deployments") or {}).values():
        for rep in dep.get("replicas") or []:
            pid, ip = rep.get("pid"), rep.get("node_ip")
            if not pid or rep.get("state") != "RUNNING":
                continue
            if ip and ip not in local and not _own_ip(ip):
                print(f"  replica {rep.get('replica_id')} runs on {ip}, not here: not killed")
                continue
            for victim in descendants(int(pid)) or [int(pid)]:
                try:
                    os.kill(victim, signal.SIGKILL)
                    killed.append(victim)
                except ProcessLookupError:
                    pass
    return killed


def _own_ip(ip: str) -> bool:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind((ip, 0))
        return True
    except OSError:
        return False


def _get_json(url: str) -> Any:
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return json.loads(resp.read())
    except (OSError, ValueError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


if __name__ == "__main__":
    sys.exit(main())
