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
import re
import subprocess
import sys
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
        from vllm.utils import FlexibleArgumentParser  # type: ignore[attr-defined,no-redef]
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


def _main(argv: list[str]) -> int:
    # Never let a file next to this one (tuner/engines/vllm.py...) shadow the real engine package.
    here = globals().get("__file__")
    sys.path[:] = [p for p in sys.path if p not in ("", ".", str(Path(here).parent) if here else "")]
    engine, payload = argv[0], json.loads(argv[1])
    try:
        result = check(engine, payload["args"], payload.get("base", []))
    except ImportError as exc:
        print(json.dumps({"ok": False, "importable": False, "error": f"{type(exc).__name__}: {exc}"}))
        return NOT_IMPORTABLE
    print(json.dumps(result))
    return 0


# ---- the servetune side --------------------------------------------------------------------------
def run_check(
    python: str,
    engine: str,
    args: Mapping[str, Any],
    base: list[str],
    env: Mapping[str, str] | None = None,
    timeout_s: float = 300,
) -> dict[str, Any]:
    """Run the check in the engine's interpreter (an argument list, no shell); its JSON answer.

    {"ok": True, "kinds": {...}} | {"ok": False, "error": ..., "key": ...} |
    {"ok": False, "importable": False, ...} when the engine is not installed there.
    """
    source = Path(__file__).read_text()
    payload = json.dumps({"args": dict(args), "base": list(base)})
    try:
        proc = subprocess.run(
            [python, "-c", source, engine, payload], capture_output=True, text=True, timeout=timeout_s,
            env=None if env is None else dict(env),
        )
    except FileNotFoundError as exc:
        return {"ok": False, "importable": False, "error": f"no interpreter {python!r}: {exc}"}
    except subprocess.TimeoutExpired:
        return {"ok": False, "importable": False, "error": f"argument check took over {timeout_s:g}s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"ok": False, "importable": False, "error": f"check failed (exit {proc.returncode}): {tail}"}
    return dict(json.loads(lines[-1]))


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
