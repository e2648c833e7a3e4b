"""Preflight checks that need more than the schema: values YAML and pydantic accept but the engine,
the model or the workload would not (each a SpecError: exit 2 before anything starts)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tuner.common.errors import SpecError
from tuner.spec.study import Study
from tuner.spec.workload import Empirical, Fixed, LogNormal, Normal, RequestClass, Uniform

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
        try:
            cfg: dict[str, Any] = json.loads((path / "config.json").read_text())
        except (OSError, ValueError) as exc:
            raise SpecError(f"{path / 'config.json'} is not valid JSON ({exc})", "model.name",
                            "restore the model's config.json") from None
        cfg = cfg.get("text_config", cfg) if isinstance(cfg.get("text_config"), dict) else cfg
        return cfg.get("num_attention_heads"), cfg.get("max_position_embeddings"), str(path / "config.json")
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
