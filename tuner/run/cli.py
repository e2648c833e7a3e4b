"""`python -m tuner.run`: validate a study, search with Optuna on Ray Tune or local processes, record in MLflow, promote.

Exit status: 0 done (promoted when a feasible config exists), 2 invalid input, 3 done but no config
met the SLA, 4 done but MLflow missed records while it was down (kept locally; --resume logs them),
130 interrupted (Ctrl-C or SIGTERM; finished trials kept, nothing promoted), 1 anything else.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner.common.cli_types import folder_arg, path_arg
from tuner.common.errors import SpecError, disk_full_in

if TYPE_CHECKING:
    from tuner.spec.study import Study

DEFAULT_STUDY = Path(__file__).resolve().parents[2] / "studies" / "default.yaml"
EXIT_OK, EXIT_ERROR, EXIT_INVALID, EXIT_NO_FEASIBLE = 0, 1, 2, 3
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a command whose reader closed the pipe
log = logging.getLogger("tuner.run")


def _folder(text: str) -> Path:
    """folder_arg, with a symbolic-link loop refused as argparse refuses other bad paths (resolve() raises
    RuntimeError on one, which argparse does not catch: a traceback)."""
    try:
        return folder_arg(text)
    except RuntimeError:
        raise argparse.ArgumentTypeError(f"{text} is a symbolic link loop; give a folder") from None


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from tuner.common.prog import prog

    p = argparse.ArgumentParser(prog=prog("run"), description=__doc__.splitlines()[0])
    p.add_argument("--study", type=path_arg, default=None, help="study YAML (default: studies/default.yaml)")
    p.add_argument("--output", type=_folder, default=None, help="output folder (default: runs/<study name>)")
    p.add_argument("--trials", type=int, default=None, help="override budget.trials")
    p.add_argument("--max-concurrent", type=int, default=None, help="override budget.max_concurrent")
    p.add_argument("--mlflow-uri", default=None, help="tracking URI (default: SQLite in the output folder)")
    p.add_argument("--resume", action="store_true", help="continue a study whose driver stopped")
    p.add_argument("--dry-run", action="store_true", help="validate and print the plan; start nothing")
    p.add_argument("--no-promote", action="store_true", help="skip promotion")
    p.add_argument("--seed", type=int, default=None, help="override the study seed")
    p.add_argument("--executor", choices=("ray", "local"), default=None,
                   help="where trials run: ray (Ray Tune trials, the default) or local (subprocesses on this "
                        "host, one per GPU, no Ray); overrides resources.executor")
    p.add_argument("--tracking", choices=("live", "deferred"), default=None,
                   help="live: each trial logged to MLflow as it finishes; deferred: kept in the output folder and "
                        "logged at the end (or by --log-only); overrides tracking.mode")
    p.add_argument("--log-only", type=_folder, default=None, metavar="OUTPUT",
                   help="log a deferred study's output folder to MLflow (runs nothing; safe to repeat)")
    p.add_argument("-v", "--verbose", action="store_true")
    return p.parse_args(argv)


def override(data: dict[str, Any], section: str, flags: dict[str, Any]) -> None:
    """Command-line values replace keys of a study section. A section that is not a mapping is left as
    written, so the study's validation names it (merging into it would fail with a bare TypeError)."""
    given = {k: v for k, v in flags.items() if v is not None}
    current = data.get(section)
    if given and (current is None or isinstance(current, dict)):
        data[section] = {**(current or {}), **given}


def load(args: argparse.Namespace) -> tuple[Study, dict[str, Any], Path]:
    from tuner.spec.load import (  # here: `--help` answers without pydantic
        load_yaml,
        not_a_space_file,
        validate,
    )
    from tuner.spec.study import Study

    path = args.study or DEFAULT_STUDY
    data = load_yaml(path)
    if not isinstance(data, dict):
        raise SpecError("expected a mapping at the top level", str(path), "write key: value pairs")
    not_a_space_file(data, path)
    for flag, value in (("--trials", args.trials), ("--max-concurrent", args.max_concurrent)):
        if value is not None and value <= 0:
            raise SpecError(f"{flag} must be > 0, got {value}", flag, "give a positive whole number")
    override(data, "budget", {"trials": args.trials, "max_concurrent": args.max_concurrent})
    if args.seed is not None:
        data["seed"] = args.seed
    override(data, "tracking", {"mode": args.tracking})
    override(data, "resources", {"executor": args.executor})
    study = validate(Study, data, str(path))
    return study, data, path


def log_only(args: argparse.Namespace) -> int:
    """`--log-only OUTPUT`: a deferred study's folder to MLflow (tuner.tracking.deferred), under the folder's lock."""
    from tuner.run.checks import read_json_object
    from tuner.run.lock import OutputLock
    from tuner.tracking.credentials import strip_credentials, use_credentials
    from tuner.tracking.deferred import log_folder
    from tuner.tracking.mlflow_log import check_uri

    out = args.log_only.resolve()
    fix = "give the output folder of a study run with --tracking deferred"
    if not (out / "state.json").is_file():
        raise SpecError(f"{out} holds no readable state.json", "--log-only", fix)
    state = read_json_object(out / "state.json", "--log-only", fix)
    uri = args.mlflow_uri or state.get("tracking_uri") or ""
    if not isinstance(uri, str):
        raise SpecError(f"{out / 'state.json'} has a tracking_uri that is not text ({uri!r})", "--log-only",
                        "give the tracking URI with --mlflow-uri")
    check_uri(uri, "--mlflow-uri")
    lock = OutputLock(out)
    lock.acquire()  # exit 2 while the study (or another --log-only) holds the folder
    try:
        logged = log_folder(out, use_credentials(uri))
    finally:
        lock.release()
    print(f"logged {logged.new_trials} trial(s) to {strip_credentials(uri)} ({logged.already} already there); "
          f"MLflow parent run: {logged.parent_run_id}")
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from tuner.run.quiet import quiet

    quiet(args.verbose)  # before Ray and Tune load: no config box, TensorBoard hints or start-up notices
    from tuner.run.lock import OutputLock
    from tuner.search.signals import EXIT_INTERRUPTED, Interrupt

    lock: OutputLock | None = None
    out = Path("runs")
    Interrupt.reset()
    try:
        if args.log_only is not None:
            ignored = [flag for flag, value in (
                ("--study", args.study), ("--output", args.output), ("--resume", args.resume), ("--dry-run", args.dry_run),
                ("--trials", args.trials), ("--max-concurrent", args.max_concurrent), ("--seed", args.seed),
                ("--executor", args.executor), ("--tracking", args.tracking), ("--no-promote", args.no_promote),
            ) if value not in (None, False)]
            if ignored:  # --log-only runs nothing: these would be ignored (--dry-run's "start nothing" broken)
                raise SpecError(f"{', '.join(ignored)} cannot go with --log-only, which only logs a study's "
                                "output folder to MLflow (it runs, checks and promotes nothing)", "--log-only",
                                f"drop {', '.join(ignored)} (--mlflow-uri and -v may stay), or run the study "
                                "without --log-only")
            return log_only(args)
        study, data, path = load(args)
        for line in study.warnings():
            print(f"warning: {line}", file=sys.stderr)
        out = (args.output or Path("runs") / study.name).resolve()
        from tuner.run.preflight import preflight
        from tuner.tracking.credentials import strip_credentials, use_credentials
        from tuner.tracking.mlflow_log import check_uri, default_uri

        space = preflight(study, path.parent.resolve(), out)
        from tuner.run.checks import check_fresh_run, check_resume_files

        if args.resume:
            check_resume_files(out)
        else:
            check_fresh_run(out)
        if args.mlflow_uri is not None and not args.mlflow_uri.strip() and args.mlflow_uri:
            raise SpecError("the tracking URI is blank (only spaces)", "--mlflow-uri",
                            "give a tracking URI, or leave the flag out for SQLite in the output folder")
        if args.mlflow_uri and any(ord(c) < 32 or ord(c) == 127 for c in args.mlflow_uri):
            raise SpecError("the tracking URI holds a control character (a line break?)", "--mlflow-uri",
                            "give the URI on one line")
        uri = args.mlflow_uri or study.tracking.mlflow_uri or ""
        if not uri and args.resume:  # the store the study was recorded in (an MLflow server given at the start)
            from tuner.run.resume_check import stored_uri

            uri = stored_uri(out)
        if uri:  # the default store lives in the output folder, which preflight found writable
            check_uri(uri, "--mlflow-uri" if args.mlflow_uri else f"{path}: tracking.mlflow_uri"
                      if study.tracking.mlflow_uri else f"{out / 'state.json'}: tracking_uri",
                      reach=study.tracking.mode == "live")
        uri = uri or default_uri(out)
        if args.dry_run:
            from tuner.run.resume_check import check_resume
            from tuner.run.summary import print_plan

            if args.resume:  # a dry run makes every check the real run makes
                check_resume(out, study, path)
            print_plan(study, space, out, strip_credentials(uri))
            return EXIT_OK
        out.mkdir(parents=True, exist_ok=True)  # preflight checked it can be made, and left nothing behind
        lock = OutputLock(out)
        left = lock.acquire()  # exit 2 while another run holds the folder
        if args.resume:
            from tuner.run.resume_check import check_resume

            check_resume(out, study, path)
        if left.pid:
            print(f"note: the previous run on {out} (pid {left.pid}) ended without cleaning up (killed?)"
                  + (f"; stopped {len(left.stopped)} Ray process(es) it left" if left.stopped else ""),
                  file=sys.stderr)
        Interrupt.install()
        from tuner.run.executor import get_executor
        from tuner.run.flow import run_study

        executor = get_executor(study.resources.executor)
        executor.start(study, verbose=args.verbose)
        Interrupt.install()  # again: Ray's core worker put its own SIGTERM handler (a native stack dump) in
        uri = use_credentials(uri)  # in MLflow's env vars (after Ray started: its processes never see them)
        lock.record_ray(*executor.helper_pids())
        max_conc = executor.fit(study, study.budget.max_concurrent)
        return run_study(study, data, path, space, out, uri, executor=executor, max_concurrent=max_conc,
                         resume=args.resume, promote=study.promotion.enabled and not args.no_promote)
    except SpecError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except KeyboardInterrupt:
        print(f"{Interrupt.name()}: interrupted before the search started; nothing promoted. "
              "Run the same command again (with --resume if trials had finished)", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `tuner.run --dry-run | head`: the reader left; stop as a SIGPIPE'd command does
        return _pipe_closed()
    except Exception as exc:
        full = disk_full_in(exc, out)
        if full is not None:  # one message, not the chained tracebacks of every layer that could not write
            print(f"error: disk full: {full} | finished trials are kept in {out / 'trials.parquet'}; free space "
                  "there, then continue with --resume", file=sys.stderr)
            return EXIT_ERROR
        log.exception("study failed")
        print(f"error: study failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    finally:
        if lock is not None:
            lock.release()


def run_main(argv: list[str] | None = None) -> int:
    """tuner.run's main as a command: a second Ctrl-C that lands outside the study's own handling (its last
    clean-up steps) stops it at once with exit 130, not a KeyboardInterrupt traceback and exit 1."""
    from tuner.search.signals import EXIT_INTERRUPTED

    try:
        code = main(argv)
        sys.stdout.flush()  # what is still buffered (stdout is a pipe) meets a closed reader here, not at exit
        return code
    except BrokenPipeError:
        return _pipe_closed()
    except KeyboardInterrupt:
        print("servetune: stopped at once (second signal)", file=sys.stderr)
        return EXIT_INTERRUPTED


def _pipe_closed() -> int:
    """stdout's reader has gone: point stdout at /dev/null (so the interpreter's last flush cannot fail again)
    and end with the status a shell gives a command killed by SIGPIPE."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return EXIT_BROKEN_PIPE


if __name__ == "__main__":
    t0 = time.monotonic()
    code = main()
    sys.exit(code)
