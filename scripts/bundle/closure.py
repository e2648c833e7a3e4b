"""Which distributions (name, version) the bundle must carry.

The versions come from environments that were tested, never from a fresh resolve: a reference
environment where servetune's own dependencies are installed (`--reference-python`), and an engine
lock (name==version lines) that was proven on the target. The walk starts at the requirements of
pyproject.toml (plus the extra's, taken from the lock), evaluates markers for the *target* Python, and
stops at every distribution the target image already has (`--target-has`).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import tomllib
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version


@dataclass
class Need:
    name: str
    version: str
    source: str  # "reference" or the lock file's name
    why: list[str] = field(default_factory=list)  # who asked for it (first few)


def marker_env(python_version: str) -> dict[str, str]:
    """Marker values of a Linux x86-64 CPython target."""
    return {"python_version": python_version, "python_full_version": python_version + ".0",
            "implementation_name": "cpython", "platform_python_implementation": "CPython",
            "sys_platform": "linux", "platform_system": "Linux", "os_name": "posix",
            "platform_machine": "x86_64", "extra": ""}


def applies(req: Requirement, env: dict[str, str], extras: set[str]) -> bool:
    if req.marker is None:
        return True
    return any(req.marker.evaluate({**env, "extra": e}) for e in (extras | {""}))


def project_requirements(pyproject: Path, extra: str | None) -> tuple[list[Requirement], list[Requirement]]:
    """(servetune's own requirements, the extra's requirements)."""
    data = tomllib.loads(pyproject.read_text())["project"]
    own = [Requirement(r) for r in data.get("dependencies", [])]
    opt = data.get("optional-dependencies", {})
    if extra is not None and extra not in opt:
        raise SystemExit(f"error: pyproject.toml has no extra {extra!r} (has {sorted(opt)}); fix: --extra one of them")
    return own, [Requirement(r) for r in opt.get(extra, [])] if extra else []


_DUMP = """
import importlib.metadata as md, json, sys
out = {}
for d in md.distributions():
    n = d.metadata["Name"]
    if n:
        out[n] = {"version": d.version, "requires": d.requires or []}
json.dump(out, sys.stdout)
"""


def reference_env(python: str) -> dict[str, dict]:
    """name -> {version, requires} of every distribution installed for `python`."""
    raw = subprocess.run([python, "-c", _DUMP], check=True, capture_output=True, text=True).stdout
    return {canonicalize_name(k): v for k, v in json.loads(raw).items()}


def read_lock(path: Path) -> dict[str, str]:
    """name==version lines (# comments, blank lines ignored) -> {name: version}."""
    out: dict[str, str] = {}
    for i, line in enumerate(path.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*==\s*([^\s;]+)", line)
        if not m:
            raise SystemExit(f"error: {path}:{i}: expected name==version, got {line!r}")
        out[canonicalize_name(m.group(1))] = m.group(2)
    return out


def read_target(path: Path) -> dict[str, str | None]:
    """What the target image has: `name` or `name==version` per line -> {name: version or None}."""
    out: dict[str, str | None] = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, ver = line.partition("==")
            out[canonicalize_name(name.strip())] = ver.strip() or None
    return out


def satisfied_by_target(req: Requirement, target: dict[str, str | None]) -> bool:
    """The image has it, at a version that fits (an unknown version is taken as fitting; the host-side
    check in install.sh reads the real one)."""
    name = canonicalize_name(req.name)
    if name not in target:
        return False
    ver = target[name]
    return ver is None or req.specifier.contains(Version(ver), prereleases=True)


def walk(roots: list[Requirement], versions: dict[str, tuple[str, str]], requires: dict[str, list[str]],
         target: dict[str, str | None], python_version: str) -> tuple[dict[str, Need], list[str]]:
    """Breadth-first over requirements; versions: name -> (version, source). Returns (needs, problems)."""
    env = marker_env(python_version)
    needs: dict[str, Need] = {}
    problems: list[str] = []
    queue: list[tuple[Requirement, str]] = [(r, "servetune") for r in roots]
    seen_extras: dict[str, set[str]] = {}
    while queue:
        req, parent = queue.pop(0)
        if not applies(req, env, set()):
            continue
        name = canonicalize_name(req.name)
        if satisfied_by_target(req, target):
            continue
        if name not in versions:
            problems.append(f"{req} (needed by {parent}) is in neither the lock, the reference env nor the target")
            continue
        ver, source = versions[name]
        if not req.specifier.contains(Version(ver), prereleases=True):
            problems.append(f"{parent} needs {req}, but the version taken is {name}=={ver} ({source})")
        new_extras = set(req.extras) - seen_extras.get(name, set())
        if name in needs and not new_extras:
            if len(needs[name].why) < 4:
                needs[name].why.append(parent)
            continue
        seen_extras.setdefault(name, set()).update(req.extras)
        needs.setdefault(name, Need(name, ver, source, [parent]))
        for r in requires.get(name, []):
            sub = Requirement(r)
            if sub.marker is not None and "extra" in str(sub.marker):
                if not any(sub.marker.evaluate({**env, "extra": e}) for e in seen_extras[name]):
                    continue
            elif not applies(sub, env, set()):
                continue
            sub_no_marker = Requirement(str(sub).split(";")[0])
            queue.append((sub_no_marker, f"{name}=={ver}"))
    return needs, problems


def plan(pyproject: Path, extra: str | None, reference_python: str, lock: Path | None,
         target: Path | None, python_version: str) -> tuple[dict[str, Need], list[str]]:
    """servetune's closure from the reference env, plus every line of the engine lock (the lock is the
    engine's own closure minus the target; wheels.check() then reads every carried wheel's metadata)."""
    own, extra_reqs = project_requirements(pyproject, extra)
    ref = reference_env(reference_python)
    locked = read_lock(lock) if lock else {}
    versions = {n: (d["version"], "reference") for n, d in ref.items()}
    versions.update({n: (v, lock.name) for n, v in locked.items()})  # the engine's proven versions win
    requires = {n: d["requires"] for n, d in ref.items() if n not in locked}
    tgt = read_target(target) if target else {}
    needs, problems = walk(own, versions, requires, tgt, python_version)
    for n, v in locked.items():
        if n not in tgt:
            needs.setdefault(n, Need(n, v, lock.name, ["engine lock"]))
    for r in extra_reqs:
        if canonicalize_name(r.name) not in locked:
            problems.append(f"the extra's {r} is not in the engine lock; fix: add it to {lock}")
    return needs, problems


def main_print(needs: dict[str, Need]) -> None:
    for n in sorted(needs):
        print(f"{n}=={needs[n].version}  # {needs[n].source}; {', '.join(needs[n].why[:3])}", file=sys.stderr)


__all__ = ["Marker", "Need", "main_print", "plan", "read_lock", "read_target", "walk"]
