"""The bad-input corpus's parts: a case (one mistake, its exact message), the edits that make it from the
default study, and `prepare`, which writes a case's study for the CLI. The cases are in bad_input_study.py,
bad_input_values.py and bad_input_files.py; bad_input_cases.py joins them and renders docs/bad-input.md."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
WILD = "<*>"  # in a message: any text (an OS or library error that differs between machines)


@dataclass
class Ctx:
    """What a case may change: the study data (or its raw text), extra CLI args, the output folder."""

    tmp: Path
    data: dict[str, Any]
    text: str | None = None
    args: list[str] = field(default_factory=list)
    output: Path | None = None
    study_path: Path | None = None


Edit = Callable[[Ctx], None]


@dataclass(frozen=True)
class Case:
    id: str
    what: str  # the mistake, in words, for the docs
    edits: tuple[Edit, ...]
    message: str  # stderr after "error: ", with {study} and {tmp} placeholders and <*> wildcards
    needs_ray: bool = False  # checked only once a Ray cluster is up (run as a subprocess)
    bug: str = ""  # known wrong message today (the test is a strict xfail until its owner fixes it)


def base_study() -> dict[str, Any]:
    """The default study, short: every case starts from this valid file."""
    data = yaml.safe_load((ROOT / "studies" / "default.yaml").read_text())
    data["name"] = "bad"
    data["budget"] = {"trials": 2, "max_concurrent": 1}
    return data


# ---- edits -----------------------------------------------------------------------------------
def put(dotted: str, value: Any) -> Edit:
    def edit(c: Ctx) -> None:
        *parents, last = dotted.split(".")
        node = c.data
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = value
    return edit


def drop(dotted: str) -> Edit:
    def edit(c: Ctx) -> None:
        *parents, last = dotted.split(".")
        node = c.data
        for p in parents:
            node = node[p]
        del node[last]
    return edit


def raw(text: str) -> Edit:
    def edit(c: Ctx) -> None:
        c.text = text
    return edit


def cli(*args: str) -> Edit:
    def edit(c: Ctx) -> None:
        c.args += [a.format(tmp=c.tmp, root=ROOT) for a in args]
    return edit


def file(name: str, content: bytes | str) -> Edit:
    def edit(c: Ctx) -> None:
        p = c.tmp / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content.encode() if isinstance(content, str) else content)
    return edit


def parquet(name: str, columns: dict[str, list[Any]]) -> Edit:
    def edit(c: Ctx) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table(columns), c.tmp / name)
    return edit


def model_dir(files: dict[str, bytes]) -> Edit:
    """A local model folder `model/` with these files (and model.name pointing at it)."""
    def edit(c: Ctx) -> None:
        d = c.tmp / "model"
        d.mkdir(exist_ok=True)
        for n, b in files.items():
            (d / n).write_bytes(b)
        c.data["model"]["name"] = str(d)
        c.data["model"]["shape"] = "qwen3-8b"
    return edit


def output_under_file(c: Ctx) -> None:
    (c.tmp / "a-file").write_text("not a folder")
    c.output = c.tmp / "a-file" / "out"


def study_at(name: str) -> Edit:
    def edit(c: Ctx) -> None:
        c.study_path = c.tmp / name
    return edit


def dup_key(c: Ctx) -> None:
    text = yaml.safe_dump(c.data, sort_keys=False)
    c.text = text + "budget:\n  trials: 500\n"


def cls(name: str) -> dict[str, Any]:
    """A valid request class."""
    return {"name": name, "weight": 1, "input": {"dist": "fixed", "value": 10}, "output": {"dist": "fixed", "value": 5}}


# Known wrong messages (tests are strict xfails until fixed in their owner's module).
SHA_OF_HELLO = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"  # sha256(b"hello")

URI_FIX = ("use http(s)://host:port (an MLflow server), sqlite:///path/mlflow.db, or leave it out (SQLite in the "
           "output folder)")

def out_file(name: str, content: bytes | str) -> Edit:
    """A file already in the output folder (what --resume finds there)."""
    def edit(c: Ctx) -> None:
        p = c.tmp / "out" / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content.encode() if isinstance(content, str) else content)
    return edit


def sim_engine_as(engine: str, python: str) -> Edit:
    """Run a real engine (with the given interpreter) instead of the simulator."""
    def edit(c: Ctx) -> None:
        c.data["engine"] = engine
        c.data.pop("sim", None)
        c.data["engines"] = {engine: {"python": python}}
        c.data["search_space"] = {}
    return edit


def space_edit(change: Callable[[dict[str, Any]], None]) -> Edit:
    """The study searches a copy of the built-in vLLM space (tmp/space.yaml) with one change."""
    def edit(c: Ctx) -> None:
        data = yaml.safe_load((ROOT / "search_spaces" / "vllm.yaml").read_text())
        change(data)
        (c.tmp / "space.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
        c.data["search_space"] = {"file": "space.yaml"}
    return edit


def param(name: str, **fields: Any) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        data["params"][name].update(fields)
    return change


def first_if(value: Any) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        data["constraints"][0]["if"] = value
    return change


BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True))
STATE = '{"parent_run_id": "0123abcd", "tracking_uri": "sqlite:///x", "study": "other.yaml", "study_name": "other"}'
NO_SERVER = ("start it (mlflow server --host 127.0.0.1 ...) or leave the URI out to use a local SQLite store")
RESUME_FIX = "restore the file from a backup, or start the study afresh in another --output"


def dyn(name: str = "a", inp: Any = 10, out: Any = 5, **kw: Any) -> list[dict[str, Any]]:
    return [{"name": name, "weight": 1, "input": inp, "output": out, **kw}]


# Issue 21: values YAML accepts but the engine, the model, MLflow or the search would not; files that are
# not YAML text; messages that misled; --resume over a folder that is not this study's.
def fifo(name: str) -> Edit:
    """A named pipe with no writer (opening it for reading waits forever)."""
    def edit(c: Ctx) -> None:
        import os

        (c.tmp / name).parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(c.tmp / name)
    return edit


def link_loop(name: str) -> Edit:
    """Two symbolic links pointing at each other."""
    def edit(c: Ctx) -> None:
        (c.tmp / name).symlink_to(c.tmp / f"{name}.other")
        (c.tmp / f"{name}.other").symlink_to(c.tmp / name)
    return edit


def trace_at(name: str) -> Edit:
    def edit(c: Ctx) -> None:
        c.data["workload"].pop("profile", None)
        c.data["workload"]["trace"] = {"path": name}
    return edit


def dataset_at(name: str, **settings: Any) -> Edit:
    def edit(c: Ctx) -> None:
        c.data["workload"].pop("profile", None)
        c.data["workload"]["dataset"] = {"path": name, **{k: v.format(tmp=c.tmp) if isinstance(v, str) else v
                                                           for k, v in settings.items()}}
    return edit


SHAREGPT = '{"conversations": [{"from": "human", "value": "hello there how are you"}, {"from": "gpt", "value": "fine thanks a lot"}]}\n'
DEEP_JSON = "[" * 100_000 + "]" * 100_000

# Audit 2 (new kinds of input): YAML structure, paths that are not plain files, files the readers choke on.
MANIFEST_FIX = "use sha256sum output"

NAME_FIX = "write snake_case names like max_num_seqs, or speculative_config.method for a field (servetune makes the --flag)"

CONTROL_FIX = ("write it on one line, without control characters (a line break here would split log lines, argv values "
               "and error messages)")


def prepare(case: Case, tmp: Path) -> tuple[list[str], Path, Path]:
    """Write the case's study into tmp; (CLI args, study path, output folder)."""
    ctx = Ctx(tmp=tmp, data=base_study())
    for e in case.edits:
        e(ctx)
    study = ctx.study_path or tmp / "study.yaml"
    if ctx.study_path is None:
        study.write_text(ctx.text if ctx.text is not None else yaml.safe_dump(ctx.data, sort_keys=False))
    out = ctx.output or tmp / "out"
    return ["--study", str(study), "--output", str(out), *ctx.args], study, out
