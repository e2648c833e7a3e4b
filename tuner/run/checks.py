"""Preflight checks that need more than the schema: values YAML and pydantic accept but the engine,
the model or the workload would not (each a SpecError: exit 2 before anything starts)."""

from __future__ import annotations

import json
import subprocess
import traceback
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tuner.common.errors import SpecError
from tuner.spec.load import special_file
from tuner.spec.study import Study
from tuner.spec.workload import (
    Dataset,
    Empirical,
    Fixed,
    LogNormal,
    Normal,
    RequestClass,
    Trace,
    Uniform,
    Workload,
)

_PATHLIKE = ("/", "./", "../", "~")


def model_path(study: Study, base_dir: Path) -> Path | None:
    """The model's local folder when model.name is a path (a hub id is `org/name`, never starts with / . ~)."""
    name = study.model.name
    if not name.startswith(_PATHLIKE) and not (base_dir / name).exists():
        return None
    p = Path(name).expanduser()
    return p if p.is_absolute() else base_dir / p


def check_model_path(study: Study, base_dir: Path) -> None:
    path = model_path(study, base_dir)
    if path is not None and not path.exists() and not study.model.must_exist:  # must_exist: check_model
        raise SpecError(f"model path {study.model.name} does not exist", "model.name",
                        "give an existing local folder, or a hub id like Qwen/Qwen3-8B")


def model_limits(study: Study, base_dir: Path) -> tuple[int | None, int | None, str]:
    """(attention heads, longest context, where they come from) from a local config.json or the
    simulator's catalogue; (None, None, '') when servetune cannot know them."""
    path = model_path(study, base_dir)
    if path is not None and (path / "config.json").is_file():
        config = path / "config.json"
        try:
            cfg: Any = json.loads(config.read_text()) if special_file(config) is None else None
        except (OSError, ValueError, RecursionError) as exc:
            why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            raise SpecError(f"{config} is not valid JSON ({why})", "model.name", "restore the model's config.json") from None
        if not isinstance(cfg, dict):
            raise SpecError(f"{config} is not a JSON object of settings (got {type(cfg).__name__})", "model.name",
                            "restore the model's config.json")
        cfg = cfg.get("text_config", cfg) if isinstance(cfg.get("text_config"), dict) else cfg
        heads, longest = cfg.get("num_attention_heads"), cfg.get("max_position_embeddings")
        for key, v in (("num_attention_heads", heads), ("max_position_embeddings", longest)):
            if isinstance(v, int) and not isinstance(v, bool) and v < 1:  # a limit of -1 would be "give at most -1"
                raise SpecError(f"{config}: {key} is {v}, not a positive whole number", "model.name",
                                "restore the model's config.json")
        return heads, longest, str(config)
    from tuner.sim.catalog import get_shape, shape_for

    try:
        shape = get_shape(study.model.shape or shape_for(study.model.name))
    except SpecError:
        # given, so meant: a typo (the simulator gate and these limits use it); the sim engine says so itself
        if study.model.shape is not None and "sim" not in study.engine_names:
            from tuner.sim.catalog import known_shapes

            raise SpecError(f"unknown model shape {study.model.shape!r}", "model.shape",
                            f"use one of {known_shapes()}, or leave model.shape out") from None
        return None, None, ""
    return shape.heads, shape.max_position, f"model shape {shape.name}"


def check_model_fits(study: Study, base_dir: Path) -> None:
    heads, longest, source = model_limits(study, base_dir)
    tp, mml = study.model.tensor_parallel_size, study.model.max_model_len
    if isinstance(heads, int) and heads % tp:
        raise SpecError(f"tensor_parallel_size {tp} does not divide the model's {heads} attention heads ({source})",
                        "model.tensor_parallel_size",
                        f"use a divisor of {heads}: {[d for d in (1, 2, 4, 8, 16) if heads % d == 0]}")
    if isinstance(longest, int) and mml > longest:
        raise SpecError(f"max_model_len {mml} is longer than the model's {longest} positions ({source})",
                        "model.max_model_len", f"give at most {longest}")


def typical_length(dist: Any) -> float:
    """The length a class's requests have on average (clipped to the distribution's bounds)."""
    if isinstance(dist, Fixed):
        return dist.value
    if isinstance(dist, Normal | LogNormal):
        mid = dist.mean if isinstance(dist, Normal) else dist.median
        return min(max(mid, dist.min), dist.max or mid)
    if isinstance(dist, Uniform):
        return (dist.low + dist.high) / 2
    if isinstance(dist, Empirical):
        w = dist.weights or [1.0] * len(dist.values)
        return sum(v * x for v, x in zip(dist.values, w, strict=True)) / (sum(w) or 1)
    return 0.0


def check_workload_fits(study: Study, classes: list[RequestClass]) -> None:
    """Requests longer than max_model_len are cut to fit: a class whose typical request does not fit
    would measure another workload than the one written."""
    mml = study.model.max_model_len
    for i, c in enumerate(classes):
        if c.abnormal:  # deliberately over-long requests, counted apart
            continue
        need = typical_length(c.input) + typical_length(c.output)
        if need > mml:
            where = f"workload.classes[{i}]" if study.workload.classes else "workload"
            raise SpecError(f"class {c.name!r} needs about {need:.0f} tokens (input + output) per request, more than "
                            f"model.max_model_len {mml}: its prompts would be cut", where,
                            f"raise model.max_model_len to at least {int(need) + 1} or shorten the class")


def check_engine_installed(engine: str, python: str, module: str) -> None:
    """The engine's interpreter exists and can find the engine's package (without importing it)."""
    pkg = module.split(".")[0]
    code = f"import importlib.util,sys; sys.exit(0 if importlib.util.find_spec({pkg!r}) else 3)"
    try:
        rc = subprocess.run([python, "-c", code], capture_output=True, timeout=60).returncode
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SpecError(f"{engine}'s interpreter {python} cannot run ({exc})", f"engines.{engine}.python",
                        "give the python of the environment where the engine is installed") from None
    if rc != 0:
        raise SpecError(f"{engine} is not installed for {python} (no module {pkg!r})", f"engines.{engine}.python",
                        f"install {engine} there, or set engines.{engine}.python to the interpreter of an "
                        f"environment that has it")


def _workload_file(spec: Trace | Dataset, base_dir: Path) -> Path:
    return spec.path if spec.path.is_absolute() else base_dir / spec.path


def check_workload_files(workload: Workload, base_dir: Path) -> None:
    """A trace or dataset path that is a pipe (opening it waits for a writer forever), a link to nothing or,
    for a trace, a folder is named as such before a reader opens it."""
    for key, spec in (("trace", workload.trace), ("dataset", workload.dataset)):
        if spec is None:
            continue
        where, path = f"workload.{key}.path", _workload_file(spec, base_dir)
        if path.is_symlink() and not path.exists():
            raise SpecError(f"{key} {path} is a symbolic link to nothing (its target is missing, or the links loop)",
                            where, f"point the link at the {key} file, or give the file's own path")
        inside = sorted(path.iterdir()) if key == "dataset" and path.is_dir() else []
        for p in [path, *inside]:
            kind = special_file(p)
            if kind is not None:
                raise SpecError(f"{key} {p} is {kind}, not a file (reading it would wait for a writer)", where,
                                f"save the {key} to a file and give that path")
        if key == "trace" and path.is_dir() and path.suffix.lower() != ".parquet":  # a .parquet folder is a dataset
            raise SpecError(f"trace {path} is a folder, not a trace file", where,
                            "give a .parquet or .jsonl file, an Azure trace .csv or a Mooncake .jsonl")


def workload_classes(workload: Workload, base_dir: Path) -> list[RequestClass]:
    """The workload's request classes, after the readers' own checks. A file a reader was not written for (a
    list in a length column, JSON nested thousands deep, a tokenizer folder without tokenizer files) raises
    whatever pyarrow, json or transformers raise: it is bad input here, named with its file, not a traceback."""
    from tuner.load.workload import classes_for, validate_workload

    check_workload_files(workload, base_dir)
    try:
        validate_workload(workload, base_dir)
        return classes_for(workload, base_dir)
    except (SpecError, OSError):
        raise
    except Exception as exc:  # the readers' libraries (pyarrow, json, transformers) raise many kinds
        spec = workload.trace or workload.dataset
        if spec is None:
            raise
        key = "trace" if workload.trace is not None else "dataset"
        frames = [f.filename for f in traceback.extract_tb(exc.__traceback__)]
        tokenizer = isinstance(spec, Dataset) and spec.tokenizer is not None and any(
            "transformers" in f or "tokenizers" in f for f in frames)
        why = "it nests too deeply to read" if isinstance(exc, RecursionError) else \
            f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        if tokenizer:
            raise SpecError(f"cannot load the tokenizer in {spec.tokenizer} ({why})", "workload.dataset.tokenizer",  # type: ignore[union-attr]
                            "give a folder with the model's tokenizer files (tokenizer.json or tokenizer_config.json "
                            "and its vocabulary), or leave tokenizer out to count words") from None
        if isinstance(exc, ValidationError):  # a request class built from the file's rows (its cls names)
            what, _, fix = exc.errors()[0]["msg"].removeprefix("Value error, ").partition(" | fix: ")
            raise SpecError(f"{key} {_workload_file(spec, base_dir)}: {what}", f"workload.{key}.path",
                            fix or "check the file's rows (docs/load.md)") from None
        fix = ("give one number per row in arrival_s, input_len and output_len (docs/load.md)" if key == "trace" else
               "give ShareGPT conversations, OpenAI messages, or name prompt_field/output_field (docs/load.md)")
        raise SpecError(f"cannot read {key} {_workload_file(spec, base_dir)} ({why})", f"workload.{key}.path",
                        fix) from None


RESUME_FIX = "restore the file from a backup, or start the study afresh in another --output"


def check_resume_files(out: Path) -> None:
    """What --resume reads in the output folder exists and is a plain file, before it is opened: a study never
    started there has no state.json (the run would quietly start afresh in a folder the user thinks holds the
    stopped one), a pipe would hang the read, a folder or JSON nested thousands deep would end in a traceback."""
    state, trials = out / "state.json", out / "trials.parquet"
    if not state.exists() and not state.is_symlink():
        raise SpecError(f"output folder {out} holds no study to resume (no state.json)", "--resume",
                        "give the --output of the stopped run, or leave --resume out to start the study afresh")
    for path in (state, trials):
        if not path.exists() and not path.is_symlink():
            continue
        kind = "a folder" if path.is_dir() else special_file(path) or (None if path.is_file() else "not a regular file")
        if kind is not None:
            raise SpecError(f"{path} is {kind}, not the study's {path.name}", "--resume", RESUME_FIX)
    try:
        json.loads(state.read_bytes())
    except RecursionError:
        raise SpecError(f"{state} is not valid JSON (truncated or corrupt: nested too deeply)", "--resume",
                        RESUME_FIX) from None
    except (OSError, ValueError):
        pass  # check_resume names what else is wrong with it


def read_json_object(path: Path, where: str, fix: str) -> dict[str, Any]:
    """A JSON object from a file servetune wrote (state.json): anything else is a SpecError, never a hang
    (a pipe), a RecursionError (deep nesting) or an AttributeError later (a list)."""
    kind = "a folder" if path.is_dir() else special_file(path)
    if kind is not None:
        raise SpecError(f"{path} is {kind}, not a JSON file", where, fix)
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        why = "nested too deeply" if isinstance(exc, RecursionError) else getattr(exc, "strerror", None) or str(exc)
        raise SpecError(f"{path} is not valid JSON (truncated or corrupt: {why})", where, fix) from None
    if not isinstance(data, dict):
        raise SpecError(f"{path} is not a JSON object (got {type(data).__name__}; not a servetune state file?)",
                        where, fix)
    return data


def check_objective_classes(study: Study, classes: list[RequestClass]) -> None:
    """A per-class objective (class.<name>.<key>) names a class the workload has: another name would leave
    every trial's objective empty and the whole study unranked."""
    names = [c.name for c in classes]
    for key in ("metric", "latency_metric"):
        value = getattr(study.objective, key)
        if value.startswith("class."):
            name = value.removeprefix("class.").partition(".")[0]
            if name not in names:
                raise SpecError(f"objective {value!r} names class {name!r}, which the workload does not have",
                                f"objective.{key}", f"use one of the workload's classes: {names[:20]}")


def check_fresh_run(out: Path) -> None:
    """A fresh run (no --resume) replaces the folder's trials.parquet. Trials MLflow has are kept there; trials
    it lacks (deferred tracking not yet logged with --log-only, or an MLflow outage) exist only in that file,
    so a fresh run over them would lose them: refused before anything is written."""
    trials = out / "trials.parquet"
    if not trials.is_file():
        return
    from tuner.common.atomic import read_table

    try:
        table = read_table(trials)
    except Exception:  # noqa: BLE001 - an unreadable table is not recoverable records; the run replaces it
        return
    if "mlflow_run_id" not in table.column_names:
        return
    missing = sum(1 for v in table.column("mlflow_run_id").to_pylist() if not v)
    if missing:
        raise SpecError(f"output folder {out} holds {missing} finished trial(s) MLflow does not have yet; a fresh run "
                        "would replace its trials.parquet and lose them", "--output",
                        f"continue with --resume (it logs them), log a deferred study first with --log-only {out}, "
                        "or choose another --output")
