"""Read YAML files into strict models, turning every problem into a SpecError that says where."""

from __future__ import annotations

import stat
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
    "less_than_equal": "give a smaller value",
    "bool_parsing": "give true or false",
    "string_type": "give a string",
    "string_pattern_mismatch": "use only letters, digits, '_', '.' and '-' (no spaces)",
    "union_tag_not_found": "add dist: fixed (with value), normal, lognormal, uniform or empirical",
}
# A value of the wrong shape for one branch of a union (e.g. `engine: x` tried as a list) says nothing new.
_BRANCH_NOISE = {"list_type", "dict_type", "model_type", "model_attributes_type"}


MAX_NODES = 100_000  # values a study file may expand to through aliases (a YAML "billion laughs" is 10^9)


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping (plain YAML keeps the last silently) and
    a document whose aliases expand to more than MAX_NODES values. Merge keys (`<<: *base`) work."""

    def construct_document(self, node: yaml.Node) -> Any:
        _check_expansion(node)
        return super().construct_document(node)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<`: merged keys may be overridden here
                continue
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, (str, int, float, bool)) and key is not None:  # a list or mapping as a key
                raise yaml.constructor.ConstructorError(
                    None, None, f"a {type(key).__name__} used as a key (keys are names)", key_node.start_mark)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} given twice in one mapping", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _check_expansion(root: yaml.Node) -> None:
    """Count the values the node graph expands to (aliases counted each time they are used)."""
    memo: dict[int, int] = {}

    def size(node: yaml.Node, depth: int) -> int:
        if id(node) in memo:
            return memo[id(node)]
        if depth > 200:
            raise SpecError("YAML nesting deeper than 200 levels", f"line {node.start_mark.line + 1}",
                            "flatten the document")
        memo[id(node)] = 1  # a recursive alias counts once (and stops the walk)
        n = 1
        if isinstance(node, yaml.MappingNode):
            n += sum(size(k, depth + 1) + size(v, depth + 1) for k, v in node.value)
        elif isinstance(node, yaml.SequenceNode):
            n += sum(size(v, depth + 1) for v in node.value)
        memo[id(node)] = n
        if n > MAX_NODES:
            raise SpecError(f"YAML aliases expand to more than {MAX_NODES:,} values (an alias bomb?)",
                            f"line {node.start_mark.line + 1}", "write the values out, or use fewer nested aliases")
        return n

    size(root, 0)


MAX_FILE_BYTES = 16 * 2**20  # studies and space files are kilobytes


def special_file(path: Path) -> str | None:
    """What a path is when it is not a file one can read to its end without waiting: 'a named pipe' (open()
    waits for a writer forever), 'a socket'; None for a regular file, a folder, a device or no file."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return None


def read_text(path: Path) -> str:
    """A user file as text: a missing file, a folder, a pipe, a binary or non-UTF-8 file is a located SpecError."""
    if not path.exists():
        if path.is_symlink():  # exists() follows the link: a dangling link or a loop reads as "not found"
            raise SpecError(f"{path} is a symbolic link to nothing (its target is missing, or the links loop)",
                            str(path), "point the link at the file, or give the file's own path")
        raise SpecError(f"file not found: {path}", str(path), "check the path")
    if path.is_dir():
        raise SpecError(f"{path} is a folder, not a YAML file", str(path), "give the path of a .yaml file")
    kind = special_file(path)
    if kind is not None:
        raise SpecError(f"{path} is {kind}, not a file (reading it would wait for a writer)", str(path),
                        "save the text to a .yaml file and give that path")
    try:
        with path.open("rb") as f:  # bounded: /dev/zero or a huge log given by mistake must not fill memory
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise SpecError(f"cannot read {path} ({exc.strerror or exc})", str(path), "check its permissions") from None
    if b"\0" in data[:8192]:
        raise SpecError("a binary file, not YAML text", str(path), "give the study's .yaml file")
    if len(data) > MAX_FILE_BYTES:
        raise SpecError(f"larger than {MAX_FILE_BYTES // 2**20} MiB: not a study or space file", str(path),
                        "give the study's .yaml file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise SpecError(f"not UTF-8 text (byte 0x{data[exc.start]:02x})", f"{path}:{line}:{col}",
                        "save the file as UTF-8") from None


def load_yaml(path: Path) -> Any:
    text = read_text(path)
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except SpecError as exc:  # the alias-bomb guard: name the file
        raise SpecError(exc.what, f"{path}:{exc.where.removeprefix('line ')}" if exc.where else str(path),
                        exc.fix) from None
    except RecursionError:
        raise SpecError("YAML nesting too deep", str(path), "flatten the document") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        context, start = getattr(exc, "context", None), getattr(exc, "context_mark", None)
        if start is not None and context and ("end of stream" in problem or "<stream end>" in problem):  # an unclosed quote or bracket
            what = context.removeprefix("while scanning ").removeprefix("while parsing ")
            mark, problem = start, f"{what} that starts here is never closed (the file ends first)"
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        if "found another document" in problem:  # PyYAML says only "but found another document"
            raise SpecError("a second YAML document (a '---' line) in one file", where,
                            "keep one document: remove that '---' line (and merge what follows into the first)") from None
        raise SpecError(f"malformed YAML: {problem}", where, "fix the YAML syntax at that line") from None


def validate(model: type[M], data: Any, source: str) -> M:
    """Validate `data`; every error of the file is reported at once: the first names its key path and
    fix, the others follow in "(also: ...)"."""
    if not isinstance(data, dict):
        raise SpecError(
            f"expected a mapping at the top level, got {type(data).__name__}", source, "write key: value pairs"
        )
    found: list[tuple[str, str, str]] = []
    rest, removed = dict(data), set()
    for _ in range(len(data) + 1):
        try:
            result = model.model_validate(rest)
            break
        except SpecError as exc:  # raised by a validator that knows its own key path: it stops pydantic,
            found.append((exc.where, exc.what, exc.fix))  # so validate again without that key for the rest
            top = exc.where.split(".")[0].split("[")[0]
            if top not in rest:
                break
            del rest[top]
            removed.add(top)
        except ValidationError as exc:
            found += [e for e in _lines(exc) if not (e[1].startswith("required key") and e[0] in removed)]
            break
    if not found:
        return result
    loc, msg, fix = found[0]
    more = "" if len(found) == 1 else " (also: " + "; ".join(f"{loc_}: {m}" for loc_, m, _ in found[1:6]) + (
        f"; and {len(found) - 6} more" if len(found) > 6 else "") + ")"
    raise SpecError(msg + more, f"{source}: {loc}" if loc else source, fix)


def _lines(exc: ValidationError) -> list[tuple[str, str, str]]:
    """(key path, what, fix) of each pydantic error, one union branch kept."""
    lines = []
    errors = _one_branch(_scalar_unions(exc.errors()))
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
        key, sep, rest = msg.partition(": ")
        # Strict names its field (or list item) first
        if sep and isinstance(err.get("input"), dict) and key.split("[")[0] in err["input"]:
            loc, msg = f"{loc}.{key}" if loc else key, rest
        if err["type"] == "union_tag_not_found":
            msg = f"missing {err.get('ctx', {}).get('discriminator', 'the kind')} (which distribution)"
        lines.append((loc, msg, fix or _FIXES.get(err["type"], "see the documented schema (docs/study.md)")))
    return lines


_SCALARS = {"int", "float", "str", "bool"}  # pydantic's branch names for `int | float | str | bool`


def _scalar_unions(errors: list[Any]) -> list[Any]:
    """A value that fits no branch of a scalar union (a choice of null, a list) fails each branch in turn:
    "choices[1].int: Input should be a valid integer (also: .float ...; .str ...)". One error says it instead;
    a lone scalar branch (`engine: str | list[str]` given true) keeps its message without the branch's name."""
    groups: dict[tuple[Any, ...], set[str]] = {}
    for e in errors:
        if e["loc"] and e["loc"][-1] in _SCALARS:
            groups.setdefault(tuple(e["loc"][:-1]), set()).add(e["loc"][-1])
    out: list[Any] = []
    done: set[tuple[Any, ...]] = set()
    for e in errors:
        loc = tuple(e["loc"])
        if not loc or loc[-1] not in _SCALARS:
            out.append(e)
        elif len(groups[loc[:-1]]) < 3:
            out.append({**e, "loc": loc[:-1]})
        elif loc[:-1] not in done:
            done.add(loc[:-1])
            v = e.get("input")
            shown = "null" if v is None else f"{type(v).__name__} {v!r}"[:200]
            out.append({**e, "loc": loc[:-1], "type": "scalar_union",
                        "msg": f"got {shown}, which is not a number, text or true/false | fix: give a number, "
                               "text or true/false"})
    return out


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


def not_a_space_file(data: Any, path: Path) -> None:
    """A search-space file given where a study belongs gets a word of its own, not 'name is missing'."""
    if isinstance(data, dict) and "params" in data and "name" not in data:
        raise SpecError(f"{path} is a search-space file (it has params:), not a study", str(path),
                        f"give a study with --study, and point its search_space.file at {path.name}")


def load_study(path: Path) -> Study:
    data = load_yaml(path)
    not_a_space_file(data, path)
    return validate(Study, data, str(path))


def load_space_file(path: Path) -> SearchSpaceFile:
    return validate(SearchSpaceFile, load_yaml(path), str(path))
