"""Mutation fuzzing of user-facing files: every leaf of a valid study (or search-space file) replaced, one
at a time, by a value of the wrong kind, and `tuner.run --dry-run` run on it in this process.

The contract (docs/bad-input.md): any input ends in exit 0 (accepted) or exit 2 with one `error:` line;
never a traceback, exit 1 or an exception. `python tests/reliability/fuzz_inputs.py [--all]` prints the
tally and every input that broke the contract (--all: every study in studies/ and every space file).
"""

from __future__ import annotations

import contextlib
import copy
import io
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
# wrong kinds, edges and sizes: null, empty, text, negative, zero, infinity, NaN, bool, containers, huge,
# text that reads as a number, non-ASCII, very long, tiny
BAD: list[Any] = [None, "", "x", -1, 0, float("inf"), float("nan"), True, [], {}, [1, 2], {"a": 1}, 10**30, -0.5,
                  "1e999", "NaN", "\u221e", "a" * 5000, 1e-7]


@dataclass
class Outcome:
    where: str  # file and key path
    value: str
    rc: int | str  # exit status, or "EXC" for an exception that escaped main()
    tail: str  # the last stderr line (or the traceback's end)


def leaves(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    yield path, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from leaves(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from leaves(v, (*path, i))


def _set(data: Any, path: tuple[Any, ...], value: Any) -> None:
    for p in path[:-1]:
        data = data[p]
    data[path[-1]] = value


def dry_run(study: dict[str, Any], tmp: Path) -> tuple[int | str, str]:
    from tuner.run.cli import main

    f = tmp / "study.yaml"
    f.write_text(yaml.safe_dump(study, allow_unicode=True))
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            rc: int | str = main(["--study", str(f), "--output", str(tmp / "out"), "--dry-run"])
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else 1
    except Exception as exc:  # noqa: BLE001 - the fuzzer reports it
        return "EXC", f"{type(exc).__name__}: {exc}"[:300]
    lines = err.getvalue().strip().splitlines()
    text = err.getvalue()
    return (1 if "Traceback" in text and rc == 2 else rc), (lines[-1][:300] if lines else "")


def mutations(base: Any, values: list[Any]) -> Iterator[tuple[str, Any, Any]]:
    """(key path, value, a copy of `base` with that one leaf replaced) for every leaf and value."""
    for path, old in list(leaves(base)):
        for bad in values if path else []:
            if bad == old and type(bad) is type(old):
                continue
            data = copy.deepcopy(base)
            _set(data, path, bad)
            yield ".".join(map(str, path)), bad, data


def fuzz_study(study_file: Path, tmp: Path, values: list[Any] = BAD) -> Iterator[Outcome]:
    for key, bad, data in mutations(yaml.safe_load(study_file.read_text()), values):
        rc, tail = dry_run(data, tmp)
        yield Outcome(f"{study_file.name}: {key}", repr(bad)[:40], rc, tail)


def fuzz_space(space_file: Path, study_file: Path, tmp: Path, values: list[Any] = BAD) -> Iterator[Outcome]:
    """The study searches a mutated copy of the space file."""
    study = yaml.safe_load(study_file.read_text())
    target = tmp / "space.yaml"
    study["search_space"] = {**(study.get("search_space") or {}), "file": str(target)}
    for key, bad, data in mutations(yaml.safe_load(space_file.read_text()), values):
        target.write_text(yaml.safe_dump(data, allow_unicode=True))
        rc, tail = dry_run(study, tmp)
        yield Outcome(f"{space_file.name}: {key}", repr(bad)[:40], rc, tail)


def broken(outcomes: list[Outcome]) -> list[Outcome]:
    """Inputs that broke the contract: not exit 0 or 2, or an exit 2 without an `error:` line."""
    return [o for o in outcomes if o.rc not in (0, 2) or (o.rc == 2 and "error:" not in o.tail)]


def main() -> int:
    import tempfile

    everything = "--all" in sys.argv
    studies = sorted((ROOT / "studies").glob("*.yaml")) if everything else [ROOT / "studies" / "default.yaml"]
    spaces = [ROOT / "search_spaces" / "vllm.yaml"] + ([ROOT / "search_spaces" / "sglang.yaml"] if everything else [])
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for s in studies:
            outcomes += fuzz_study(s, tmp)
        for sp in spaces:
            study = ROOT / "studies" / ("h200-sglang-dynamic.yaml" if "sglang" in sp.name else "default.yaml")
            outcomes += fuzz_space(sp, study, tmp)
    bad = broken(outcomes)
    print(f"inputs={len(outcomes)} " + " ".join(f"exit_{k}={v}" for k, v in sorted(Counter(map(str, (
        o.rc for o in outcomes))).items())) + f" broken={len(bad)}")
    for o in bad:
        print(f"  {o.where} = {o.value}: {o.rc} {o.tail}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
