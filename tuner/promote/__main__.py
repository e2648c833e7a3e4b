"""`python -m tuner.promote`: promote a finished study, deploy it to staging, or roll staging back.

    python -m tuner.promote --study-run ID [--mlflow-uri URI] [--output DIR] [--deploy [--in-place]]
                            [--canary-seconds S] [--canary-rate R | --no-canary]
    python -m tuner.promote --rollback NAME [--mlflow-uri URI] [--in-place]

--deploy: blue-green to the running Ray Serve, a streaming smoke test, then a canary load with the
study's workload and SLA at or below the confirmed capacity; a missed canary puts the previous app
back. --in-place: no side copy (one GPU): the old app stops before the new one starts. Exit status:
0 done; 1 deploy, canary or rollback failed (staging serves what it served before; the reason and
the canary's figures are printed); 2 invalid input; 3 nothing to promote.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tuner.common.cli_types import SECONDS, folder_arg, number
from tuner.common.errors import SpecError

if TYPE_CHECKING:
    from mlflow.entities.model_registry import ModelVersion

    from tuner.promote.canary import CanaryResult
    from tuner.promote.deploy import Check, ServeAdmin
    from tuner.promote.registry import ConfigRegistry
    from tuner.spec.study import Study
    from tuner.trial.result import TrialResult

DASHBOARD_ENV = "RAY_DASHBOARD_ADDRESS"


def parser() -> argparse.ArgumentParser:
    from tuner.common.prog import prog

    p = argparse.ArgumentParser(prog=prog("promote"), description=__doc__.splitlines()[0])
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--study-run", metavar="ID", help="MLflow parent run of a finished study")
    what.add_argument("--rollback", metavar="NAME", help="registered config (<study>-config) to roll back")
    p.add_argument("--mlflow-uri", metavar="URI", help="tracking URI (default: $MLFLOW_TRACKING_URI, else the "
                   "store `python -m tuner.run` used for that study, found in runs/*/state.json)")
    p.add_argument("--deploy", action="store_true", help="deploy to the running Ray Serve as the staging app")
    p.add_argument("--trial", metavar="ID", help="register (and deploy) this trial of the study instead of the "
                   "selected winner; 'baseline' for the engine defaults (e.g. a known-good staging to roll back to)")
    p.add_argument("--output", metavar="DIR", type=folder_arg, help="where promoted.yaml and promotion.json go (default: outputs/promote-<first 8 characters of the "
                   "study run id>/); for a study run promoted already, its registered files are copied here")
    p.add_argument("--no-alias", action="store_true",
                   help="register the version and write promoted.yaml but leave the staging alias where it is "
                        "(a failover side, a config to inspect); not with --deploy, which moves staging")
    p.add_argument("--address", metavar="URL", help=f"Ray dashboard (default: ${DASHBOARD_ENV} or "
                   "http://127.0.0.1:8265)")
    p.add_argument("--in-place", action="store_true",
                   help="deploy/roll back without a side copy of the app (a cluster with room for one engine, e.g. "
                        "one GPU): the old app stops, the new one starts; serving pauses during the switch")
    p.add_argument("--timeout", type=SECONDS, default=600, metavar="S", help="deploy deadline per step")
    p.add_argument("--canary-seconds", type=number(0.0, 3600.0), metavar="S",
                   help="canary length (default: the study's promotion.canary.seconds, 30)")
    canary = p.add_mutually_exclusive_group()
    canary.add_argument("--canary-rate", type=number(), metavar="R",
                        help="canary load in req/s (or concurrent streams in concurrency mode), at most the "
                             "confirmed SLA capacity (default: promotion.canary.load_fraction x capacity)")
    canary.add_argument("--no-canary", action="store_true", help="deploy after the smoke test alone")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # keep the output readable
    try:
        return _run(args)
    except SpecError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


RUNS_DIR = Path("runs")  # tuner.run's default output root (runs/<study name>)


def _uri(args: argparse.Namespace) -> str:
    """The same store `python -m tuner.run` defaults to: --mlflow-uri, $MLFLOW_TRACKING_URI, else the
    study's own output folder (its state.json names the parent run and the store it was logged to)."""
    uri = args.mlflow_uri or os.environ.get("MLFLOW_TRACKING_URI") or _uri_from_runs(args)
    if not uri:
        raise SpecError("no MLflow tracking URI", "--mlflow-uri",
                        f"pass --mlflow-uri (e.g. sqlite:///runs/study/mlflow.db), set MLFLOW_TRACKING_URI, or run "
                        f"from the folder holding {RUNS_DIR}/ (where tuner.run wrote the study)")
    return uri


def _uri_from_runs(args: argparse.Namespace) -> str | None:
    """The tracking URI in runs/<study>/state.json whose parent run (or study, for --rollback) matches."""
    import json

    for state_file in sorted(RUNS_DIR.glob("*/state.json")):
        try:
            state = json.loads(state_file.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(state, dict) or not state.get("tracking_uri"):
            continue
        if args.study_run and state.get("parent_run_id") == args.study_run:
            return str(state["tracking_uri"])
        if args.rollback and state.get("study_name") and args.rollback == f"{state['study_name']}-config":
            return str(state["tracking_uri"])
    return None


def _admin(args: argparse.Namespace) -> ServeAdmin:
    return admin_for(args.address)


def admin_for(address: str | None) -> ServeAdmin:
    """The running Serve through its dashboard (`address`, else $RAY_DASHBOARD_ADDRESS, else local);
    SpecError (exit 2) saying how to fix an unreachable or token-protected one."""
    from tuner.promote.deploy import DEFAULT_DASHBOARD, ServeAdmin  # late: Ray is slow to import

    address = address or os.environ.get(DASHBOARD_ENV) or DEFAULT_DASHBOARD
    try:
        return ServeAdmin(address)
    except Exception as exc:  # noqa: BLE001 -- any connection failure means the same to the user
        if is_auth_failure(exc):
            raise SpecError(f"the Ray dashboard at {address} refused the request: it needs an auth token "
                            f"({type(exc).__name__}: {exc})", "RAY_AUTH_MODE", TOKEN_FIX) from None
        raise SpecError(f"cannot reach the Ray dashboard at {address} ({type(exc).__name__}: {exc})",
                        "--address", "start Ray (ray start --head) or pass the dashboard URL") from None


TOKEN_FIX = ("set RAY_AUTH_MODE=token; the token is read from $RAY_AUTH_TOKEN, else the file named by "
             "$RAY_AUTH_TOKEN_PATH, else ~/.ray/auth_token (where `ray start` with token auth writes it)")


def is_auth_failure(exc: BaseException) -> bool:
    """A token-protected dashboard answers 401/403 (or says "unauthenticated"); that is not a Ray that is down."""
    text = f"{type(exc).__name__} {exc}".lower()
    return any(k in text for k in ("401", "403", "unauthorized", "unauthenticated", "forbidden",
                                   "authentication", "auth token"))


def _run(args: argparse.Namespace) -> int:
    if args.trial and not args.study_run:
        raise SpecError("--trial names a trial of a study run", "--trial", "use it with --study-run ID")
    if args.no_alias and args.deploy:
        raise SpecError("--no-alias with --deploy: a deploy makes the version staging", "--no-alias",
                        "drop --no-alias to deploy, or drop --deploy to register without touching staging")
    uri = _uri(args)  # before the slow imports: bad input answers at once
    from tuner.promote.ops import deploy_version, record_canary, rollback
    from tuner.promote.registry import STAGING, ConfigRegistry

    registry = ConfigRegistry(uri)
    if args.rollback:
        registry.rollback_target(args.rollback)  # fail before touching Serve when there is nothing
        change = rollback(registry, _admin(args), args.rollback, timeout_s=args.timeout, in_place=args.in_place)
        print(("ok: " if change.ok else "failed: ") + change.reason)
        return 0 if change.ok else 1
    if not args.deploy and (args.canary_seconds is not None or args.canary_rate is not None or args.no_canary):
        raise SpecError("canary options without --deploy", "--canary-*", "add --deploy (the canary runs against "
                        "the deployed app)")
    name, version, study = _promote(args, uri, registry)
    if version is None:
        return 3
    if not args.deploy:
        return 0
    check = None if args.no_canary else _canary_check(args, study, registry.get(name, version))
    change = deploy_version(registry, _admin(args), name, version, timeout_s=args.timeout, check=check,
                            in_place=args.in_place)
    out = args.output or Path("outputs") / f"promote-{args.study_run[:8]}"
    if change.canary is not None:
        record_canary(registry, name, version, change.canary, out)
        _print_canary(change.canary)
    if change.ok:
        print(f"deployed: {name} version {version} is staging" +
              (f" (replaced version {change.replaced}, now previous-staging)" if change.replaced else ""))
        print(f"  {change.reason}")
        return 0
    if change.rolled_back:
        staging = registry.version(name, STAGING)
        now = f"version {staging.version}" if staging is not None else "nothing (no version had staging)"
        print(f"canary failed: {name} version {version} rolled back; staging alias unchanged at {now}; "
              f"{change.reason}")
        return 1
    print(f"deploy failed, staging and its alias unchanged: {change.reason}")
    return 1


def _canary_check(args: argparse.Namespace, study: Study, mv: ModelVersion) -> Check | None:
    """The canary for this version (planned now, so a bad --canary-rate is exit 2 before Serve is touched)."""
    from tuner.promote.canary import plan, run_canary

    if not study.promotion.canary.enabled and args.canary_seconds is None and args.canary_rate is None:
        print("canary: off (promotion.canary.enabled: false)")
        return None
    try:
        capacity: float | None = float(mv.tags.get("servetune.capacity", "nan"))
    except ValueError:
        capacity = None
    capacity = capacity if capacity is not None and capacity == capacity else None
    canary = plan(study, capacity, seconds=args.canary_seconds, load=args.canary_rate)
    print(f"canary: {canary.describe()}, SLA {', '.join(str(t) for t in study.sla)}")
    model = study.model.client_name
    scale = _sim_time_scale(study, mv.tags.get("servetune.engine", ""))
    if scale != 1.0:  # read on the sim's clock, the HTTP path's own cost (~70 ms through Serve here) is scaled too
        print(f"note: the app is the simulator at time_scale {scale:g}: the canary reads wall-clock latencies of a "
              f"server {scale:g}x faster than the study's clock, so it checks the serving path (streams, errors), "
              "not the study's latency figures")

    def check(http_base: str, route_prefix: str) -> CanaryResult:
        return run_canary(study, http_base, route_prefix, model, canary)

    return check


def _print_canary(canary: CanaryResult) -> None:
    figures = canary.figures()
    line = ", ".join(f"{k}={v:.4g}" for k, v in figures.items())
    print(f"canary {'passed' if canary.passed else 'FAILED'}: {line}")


def _promote(args: argparse.Namespace, uri: str,
             registry: ConfigRegistry) -> tuple[str, str | None, Study]:
    """The registered version for the study run: the one the pipeline made, else a new one."""
    from tuner.promote.pipeline import promote_study
    from tuner.promote.registry import PICKED_TAG, model_name
    from tuner.promote.study_run import load_study_run

    study, trials = load_study_run(registry.client, args.study_run)
    name = model_name(study.name)
    picked = _picked(trials, args.trial) if args.trial else None

    def ours(v: ModelVersion) -> bool:  # the selected winner's version, or the picked trial's
        return v.tags.get(PICKED_TAG) == picked.trial_id if picked else PICKED_TAG not in v.tags

    found = registry.find(name, "servetune.study_run_id", args.study_run, where=ours)
    if found is not None:
        print(f"study run {args.study_run} was promoted already: {name} version {found.version} "
              f"(trial {found.tags.get('servetune.trial_id')})")
        if args.output is not None:  # asked for its files: the version's own, not nothing (exit 0 all the same)
            saved = _save_version_files(registry, found, args.output)
            print(f"  its Serve config: {saved}")
        return name, str(found.version), study
    out = args.output or Path("outputs") / f"promote-{args.study_run[:8]}"
    result = promote_study(study, [picked] if picked else trials, output_dir=out, tracking_uri=uri,
                           parent_run_id=args.study_run, confirm=None, set_alias=not (args.deploy or args.no_alias),
                           extra_tags={PICKED_TAG: picked.trial_id} if picked else None)
    print(("promoted: " if result.promoted else "") + result.reason)
    if not result.promoted:
        return name, None, study
    alias = f", alias {result.alias} -> version {result.model_version}" if result.alias else ""
    print(f"  registered {result.model_name} version {result.model_version}{alias}; Serve config {result.serve_config}")
    return name, result.model_version, study


def _save_version_files(registry: ConfigRegistry, version: ModelVersion, out: Path) -> Path:
    """The registered version's promoted.yaml and promotion.json, copied into `out`."""
    import shutil
    import tempfile

    from tuner.promote.pipeline import PROMOTED_FILE, SUMMARY_FILE

    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        folder = registry.download(version, Path(tmp))
        for name in (PROMOTED_FILE, SUMMARY_FILE):
            if (folder / name).exists():
                shutil.copyfile(folder / name, out / name)
    return out / PROMOTED_FILE


def _picked(trials: list[TrialResult], ref: str) -> TrialResult:
    """The trial named by --trial: its id, its number, or 'baseline' (the engine defaults)."""
    for t in trials:
        if (ref == "baseline" and t.baseline) or ref in (t.trial_id, str(t.number)):
            return t
    ids = ", ".join(t.trial_id + (" (baseline)" if t.baseline else "") for t in trials[:12])
    raise SpecError(f"the study run has no trial {ref!r}", "--trial",
                    f"give one of: {ids}{' ...' if len(trials) > 12 else ''}, or baseline")


def _sim_time_scale(study: Study, engine: str) -> float:
    """How much faster than the wall clock the deployed app serves: a simulated engine's app runs the study's
    `sim.time_scale` (its latencies are sim time, as the study measured them); a real engine's, 1."""
    from tuner.engines.registry import engine_class

    try:
        simulated = bool(engine) and engine_class(engine).simulated
    except Exception:  # noqa: BLE001 - an engine this install does not know: not the simulator
        simulated = False
    return float(study.sim.time_scale) if simulated and study.sim is not None else 1.0


if __name__ == "__main__":
    sys.exit(main())
