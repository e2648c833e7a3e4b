"""Read YAML files into strict models, turning every problem into a SpecError that says where."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from tuner.common.errors import SpecError
from tuner.spec.space_file import SearchSpaceFile
from tuner.spec.study import Study

M = TypeVar("M", bound=BaseModel)

_FIXES = {
    "extra_forbidden": "remove it or check its spelling",
    "missing": "add it (docs/study.md shows every key)",
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
    "string_pattern_mismatch": "use only letters, digits, '_', '.' and '-' (no spaces)",
    "union_tag_not_found": "add dist: fixed (with value), normal, lognormal, uniform or empirical",
}
# A value of the wrong shape for one branch of a union (e.g. `engine: x` tried as a list) says nothing new.
_BRANCH_NOISE = {"list_type", "dict_type", "model_type", "model_attributes_type"}


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping (plain YAML keeps the last silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} given twice in one mapping", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_yaml(path: Path) -> Any:
    if not path.exists():
        raise SpecError(f"file not found: {path}", str(path), "check the path")
    if path.is_dir():
        raise SpecError(f"{path} is a folder, not a YAML file", str(path), "give the path of a .yaml file")
    try:
        return yaml.load(path.read_text(), Loader=_UniqueKeyLoader)
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
    except SpecError as exc:  # raised by a validator that knows its own key path
        raise SpecError(exc.what, f"{source}: {exc.where}" if exc.where else source, exc.fix) from None
    except ValidationError as exc:
        lines = []
        errors = _one_branch(exc.errors())
        if any(e["type"] not in _BRANCH_NOISE for e in errors):
            errors = [e for e in errors if e["type"] not in _BRANCH_NOISE]
        for err in errors:
            loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"] if not _is_union_tag(p))
            loc = loc.removeprefix(".")
            # Validators may end their message with " | fix: ..." to say how to fix it.
            msg, _, fix = err["msg"].removeprefix("Value error, ").partition(" | fix: ")
            if err["type"] == "extra_forbidden":
                msg = f"unknown key {err['loc'][-1]!r}"
            if err["type"] == "missing":
                msg = f"required key {err['loc'][-1]!r} is missing"
            if err["type"] == "union_tag_not_found":
                msg = f"missing {err.get('ctx', {}).get('discriminator', 'the kind')} (which distribution)"
            fix = fix or _FIXES.get(err["type"], "see the documented schema (docs/study.md)")
            lines.append((loc, msg, fix))
        loc, msg, fix = lines[0]
        more = "" if len(lines) == 1 else " (also: " + "; ".join(f"{loc_}: {m}" for loc_, m, _ in lines[1:4]) + ")"
        raise SpecError(msg + more, f"{source}: {loc}" if loc else source, fix) from None


def _one_branch(errors: list[Any]) -> list[Any]:
    """Where a union failed in every branch, keep the branch with the fewest errors (first on a tie)."""
    branches: dict[tuple[Any, ...], dict[str, int]] = {}
    for e in errors:
        for i, part in enumerate(e["loc"]):
            if _is_union_tag(part):
                counts = branches.setdefault(tuple(e["loc"][:i]), {})
                counts[part] = counts.get(part, 0) + 1
                break
    best = {prefix: min(counts, key=lambda b: counts[b]) for prefix, counts in branches.items()}

    def keep(e: Any) -> bool:
        for i, part in enumerate(e["loc"]):
            if _is_union_tag(part):
                return best[tuple(e["loc"][:i])] == part
        return True

    return [e for e in errors if keep(e)]


def _is_union_tag(part: Any) -> bool:
    """Pydantic adds union member names (e.g. 'normal', 'list[...]') to locations; keep user keys only."""
    return isinstance(part, str) and (
        "[" in part or part in {"fixed", "normal", "lognormal", "uniform", "empirical", "SearchSpaceRef"})


def load_study(path: Path) -> Study:
    return validate(Study, load_yaml(path), str(path))


def load_space_file(path: Path) -> SearchSpaceFile:
    return validate(SearchSpaceFile, load_yaml(path), str(path))
