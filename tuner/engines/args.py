"""Trial args -> engine command-line flags, and their check against the engine's own argument parser.

Stdlib only, on purpose: the engine often lives in another interpreter (its own torch and pins), so
this file is also run there as a script (`python -c <this file> <engine> <json>`): it builds the
engine's parser (vLLM's FlexibleArgumentParser + make_arg_parser, SGLang's ServerArgs.add_cli_args),
looks each argument up, builds the flags with the same rule servetune launches with, parses them, and
prints one JSON line. Nothing here imports servetune, so both sides share exactly one rule.

The rule (`cli_flags`): None -> omitted (the engine decides); True -> `--flag`; False -> `--no-flag`
when the engine's option is negatable (argparse BooleanOptionalAction), else omitted; dict/list ->
one JSON string (`--speculative-config '{"method": ...}'`); anything else -> str(value).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

NAME = re.compile(r"^[a-z][a-z0-9_]*$")
NOT_IMPORTABLE = 3  # exit status of the check script when the engine cannot be imported there


def flag(name: str) -> str:
    """snake_case name -> --kebab-case flag."""
    return "--" + name.replace("_", "-")


def value_text(value: Any) -> str:
    """One argument value as the engine's CLI expects it."""
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value)
    return str(value)


def cli_flags(args: Mapping[str, Any], negatable: Collection[str] | Callable[[str], bool]) -> list[str]:
    """Flags for a trial's args, in the order given. `negatable(name)`: does `--no-<name>` exist?"""
    is_neg = negatable if callable(negatable) else negatable.__contains__
    out: list[str] = []
    for name, value in args.items():
        if value is None:
            continue
        if value is True:
            out.append(flag(name))
        elif value is False:
            if is_neg(name):
                out.append("--no-" + name.replace("_", "-"))
        else:
            out += [flag(name), value_text(value)]
    return out


def bad_names(args: Mapping[str, Any]) -> list[str]:
    """Names that are not plain snake_case (they could smuggle extra flags into the argv)."""
    return [k for k in args if not isinstance(k, str) or not NAME.match(k)]


# ---- the check, run inside the engine's interpreter ------------------------------------------------
class _ArgError(Exception):
    pass


def _vllm_parser() -> Any:
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:
        from vllm.utils import FlexibleArgumentParser  # type: ignore[no-redef]
    for module in ("vllm.entrypoints.launchers.cli_args", "vllm.entrypoints.openai.cli_args"):
        try:
            make_arg_parser = __import__(module, fromlist=["make_arg_parser"]).make_arg_parser
        except (ImportError, AttributeError):
            continue
        return make_arg_parser(FlexibleArgumentParser())
    from vllm.engine.arg_utils import AsyncEngineArgs

    return AsyncEngineArgs.add_cli_args(FlexibleArgumentParser())


def _vllm_validate(ns: Any) -> None:
    for module in ("vllm.entrypoints.launchers.cli_args", "vllm.entrypoints.openai.cli_args"):
        try:
            validate = __import__(module, fromlist=["validate_parsed_serve_args"]).validate_parsed_serve_args
        except (ImportError, AttributeError):
            continue
        validate(ns)
        return


def _sglang_parser() -> Any:
    import argparse

    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    return parser


def _kind(action: Any) -> str:
    if type(action).__name__ == "BooleanOptionalAction":
        return "negatable"
    if getattr(action, "nargs", None) == 0:
        return "switch"
    return "value"


def check(engine: str, args: Mapping[str, Any], base: list[str]) -> dict[str, Any]:
    """Parse `base` + the trial's flags with the engine's parser; report the first problem."""
    import difflib

    if engine in ("vllm", "sim-vllm"):
        parser = _vllm_parser()
    elif engine in ("sglang", "sim-sglang"):
        parser = _sglang_parser()
    else:
        raise ValueError(f"unknown engine {engine!r}")
    table = parser._option_string_actions
    kinds: dict[str, str] = {}
    for name in args:
        opt = flag(name)
        action = table.get(opt) or table.get("--" + name)
        if action is None:
            close = difflib.get_close_matches(opt, [o for o in table if o.startswith("--")], n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            return {"ok": False, "key": name, "error": f"{engine} has no argument {opt}{hint}"}
        kinds[name] = _kind(action)
        if args[name] is False and kinds[name] == "switch" and action.default not in (False, None):
            return {"ok": False, "key": name, "error": f"{opt} is a switch whose default is on; it cannot be set off"}
    negatable = [k for k, v in kinds.items() if v == "negatable"]
    flags = cli_flags(args, negatable)

    def _error(message: str) -> Any:
        raise _ArgError(message)

    parser.error = _error  # argparse would print usage and exit; we want the message
    try:
        ns = parser.parse_args(base + flags)
        if engine == "vllm":
            _vllm_validate(ns)
    except _ArgError as exc:
        return {"ok": False, "key": None, "error": str(exc), "kinds": kinds, "flags": flags}
    except (ValueError, TypeError) as exc:
        return {"ok": False, "key": None, "error": f"{type(exc).__name__}: {exc}", "kinds": kinds, "flags": flags}
    return {"ok": True, "kinds": kinds, "flags": flags}


def _answer(engine: str, payload: dict[str, Any]) -> dict[str, Any]:
    try:
        return check(engine, payload["args"], payload.get("base", []))
    except ImportError as exc:
        return {"ok": False, "importable": False, "error": f"{type(exc).__name__}: {exc}"}
    except Exception as exc:  # noqa: BLE001 - report any parser failure as data, never a traceback
        return {"ok": False, "importable": False, "error": f"parser failed: {type(exc).__name__}: {exc}"}


def _main(argv: list[str]) -> int:
    """`<engine> <json>`: one answer. `<engine> --serve`: one answer per JSON line on stdin (one import)."""
    # Never let a file next to this one (tuner/engines/vllm.py...) shadow the real engine package.
    here = globals().get("__file__")
    sys.path[:] = [p for p in sys.path if p not in ("", ".", str(Path(here).parent) if here else "")]
    engine = argv[0]
    if argv[1:] == ["--serve"]:
        for line in sys.stdin:
            if line.strip():
                print(json.dumps(_answer(engine, json.loads(line))), flush=True)
        return 0
    answer = _answer(engine, json.loads(argv[1]))
    print(json.dumps(answer))
    return NOT_IMPORTABLE if answer.get("importable") is False else 0


# ---- the servetune side --------------------------------------------------------------------------
class ArgChecker:
    """A long-lived check process in the engine's interpreter: the engine import (10-30 s) is paid once."""

    def __init__(self, python: str, engine: str, env: Mapping[str, str] | None = None) -> None:
        self.python, self.engine = python, engine
        self.env = dict(env or {})  # extra variables over ours (the engine's own settings.env)
        self._proc: subprocess.Popen[str] | None = None
        self._cache: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()  # one question at a time on the pipe

    def check(self, args: Mapping[str, Any], base: list[str], timeout_s: float = 300) -> dict[str, Any]:
        """{"ok": True, "kinds": {...}, "flags": [...]} | {"ok": False, "error": ..., "key": ...} |
        {"ok": False, "importable": False, "error": ...} when the engine cannot be checked there."""
        payload = json.dumps({"args": dict(args), "base": list(base)}, sort_keys=True, default=str)
        with self._lock:
            if payload in self._cache:
                return self._cache[payload]
            answer = self._ask(payload, timeout_s)
            if answer.get("importable") is not False:
                self._cache[payload] = answer
            return answer

    def _ask(self, payload: str, timeout_s: float) -> dict[str, Any]:
        import selectors

        if self._proc is None or self._proc.poll() is not None:
            try:
                self._proc = subprocess.Popen(
                    [self.python, "-c", Path(__file__).read_text(), self.engine, "--serve"],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                    env={**os.environ, **self.env}, start_new_session=True,
                )
            except OSError as exc:
                return {"ok": False, "importable": False, "error": f"cannot run {self.python!r}: {exc}"}
        proc = self._proc
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(payload + "\n")
            proc.stdin.flush()
        except OSError as exc:
            self.close()
            return {"ok": False, "importable": False, "error": f"check process died: {exc}"}
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            if not sel.select(timeout_s):
                self.close()
                return {"ok": False, "importable": False, "error": f"argument check took over {timeout_s:g}s"}
        line = proc.stdout.readline()
        if not line.startswith("{"):
            self.close()
            return {"ok": False, "importable": False, "error": f"check process exited ({proc.poll()})"}
        return dict(json.loads(line))

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.kill()
            proc.wait()


_CHECKERS: dict[tuple[str, str, str], ArgChecker] = {}


def _close_all() -> None:
    for c in _CHECKERS.values():
        c.close()


def checker(python: str, engine: str, env: Mapping[str, str] | None = None) -> ArgChecker:
    """The shared checker for one interpreter, engine and extra environment (closed at exit)."""
    key = (python, engine, json.dumps(sorted((env or {}).items())))
    if key not in _CHECKERS:
        if not _CHECKERS:
            import atexit

            atexit.register(_close_all)
        _CHECKERS[key] = ArgChecker(python, engine, env)
    return _CHECKERS[key]


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
