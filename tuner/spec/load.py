"""Read YAML files into strict models, turning every problem into a SpecError that says where."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from tuner.errors import SpecError
from tuner.spec.space import SearchSpaceFile
from tuner.spec.study import Study

M = TypeVar("M", bound=BaseModel)

_FIXES = {
    "extra_forbidden": "remove it or check its spelling",
    "missing": "add it",
    "literal_error": "use one of the allowed values",
    "int_parsing": "give a whole number",
    "int_type": "give a whole number",
    "float_parsing": "give a number",
    "float_type": "give a number",
    "greater_than": "give a larger value",
    "greater_than_equal": "give a larger value",
    "less_than": "give a smaller value",
    "bool_parsing": "give true or false",
    "string_type": "give a string",
}


def load_yaml(path: Path) -> Any:
    if not path.exists():
        raise SpecError(f"file not found: {path}", str(path), "check the path")
    if path.is_dir():
        raise SpecError(f"{path} is a folder, not a YAML file", str(path), "give the path of a .yaml file")
    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError(f"malformed YAML: {problem}", where, "fix the YAML syntax at that line") from exc


def validate(model: type[M], data: Any, source: str) -> M:
    """Validate `data`; the first error becomes a SpecError naming the key path (all errors listed)."""
    if not isinstance(data, dict):
        raise SpecError(
            f"expected a mapping at the top level, got {type(data).__name__}", source, "write key: value pairs"
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"] if not _is_union_tag(p))
            msg = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                msg = f"unknown key {err['loc'][-1]!r}"
            fix = _FIXES.get(err["type"], "see the documented schema (docs/study.md)")
            lines.append((loc, msg, fix))
        loc, msg, fix = lines[0]
        more = "" if len(lines) == 1 else " (also: " + "; ".join(f"{loc_}: {m}" for loc_, m, _ in lines[1:4]) + ")"
        raise SpecError(msg + more, f"{source}: {loc}" if loc else source, fix) from None


def _is_union_tag(part: Any) -> bool:
    """Pydantic adds union member names (e.g. 'normal', 'list[...]') to locations; keep user keys only."""
    return isinstance(part, str) and ("[" in part or part in {"fixed", "normal", "lognormal", "uniform", "empirical"})


def load_study(path: Path) -> Study:
    return validate(Study, load_yaml(path), str(path))


def load_space_file(path: Path) -> SearchSpaceFile:
    return validate(SearchSpaceFile, load_yaml(path), str(path))
