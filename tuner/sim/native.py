"""Optional compiled simulator: mypyc builds of the hot modules, used only when they match the source.

`scripts/build-sim-ext` compiles NATIVE_MODULES with mypyc into `tuner/sim/_ext/` (gitignored), outside the
normal import path, and writes `_ext/stamp.json` with a sha256 of each source file as it was compiled (and
of TYPED_DEPS, whose classes it was type-checked against). On import of `tuner.sim`, `install()` checks the
stamp against the .py files on disk: only when every hash matches (and the interpreter is the one built
for) does it put a finder first on `sys.meta_path` that loads those modules from `_ext/`; otherwise the .py
files are used, as without a build. So an edited source is never shadowed by an old build (why: a stale
extension would run the old scheduler silently), and a missing compiler, a failed build or
`SERVETUNE_SIM_PURE=1` all just mean pure Python. The compiled code does the same floating-point operations
in the same order (C doubles, built with -ffp-contract=off: no fused multiply-adds), so records are
bit-identical; tests/sim/test_native.py checks that.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

PKG = "tuner.sim"
HERE = Path(__file__).resolve().parent
EXT_DIR = HERE / "_ext"
STAMP = EXT_DIR / "stamp.json"
# the hot path: scheduler steps and their cost, decode runs, the engine loop and record building
# (sglang_sched subclasses Core, and a compiled class cannot have an interpreted subclass)
NATIVE_MODULES = ("core", "cost", "vllm_sched", "sglang_sched", "engine")
# hashed too: the classes the compiled code was type-checked against (their field types shape its C code)
TYPED_DEPS = ("catalog", "spec", "fit")
SHARED_LIB = "_native__mypyc"  # mypyc's shared library of the group (group_name tuner.sim._native)
ENV_PURE = "SERVETUNE_SIM_PURE"

status = "pure: not installed yet"  # what install() decided (reported by benchmarks/sim_speed.py)


def source_hashes() -> dict[str, str]:
    return {m: hashlib.sha256((HERE / f"{m}.py").read_bytes()).hexdigest() for m in (*NATIVE_MODULES, *TYPED_DEPS)}


def build_tag() -> str:
    """What an extension is tied to besides its source: the interpreter's ABI and platform."""
    return importlib.machinery.EXTENSION_SUFFIXES[0]  # e.g. .cpython-311-x86_64-linux-gnu.so


class _Finder(importlib.abc.MetaPathFinder):
    """Finds the compiled modules of tuner.sim (and their shared library) in _ext/."""

    def __init__(self, files: dict[str, Path]) -> None:
        self.files = files

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        f = self.files.get(fullname)
        if f is None:
            return None
        loader = importlib.machinery.ExtensionFileLoader(fullname, str(f))
        return importlib.util.spec_from_file_location(fullname, str(f), loader=loader)


def _ext_files() -> dict[str, Path] | str:
    """Module name -> extension file when the build is present and current, else why not."""
    if os.environ.get(ENV_PURE, "") not in ("", "0"):
        return f"pure: {ENV_PURE} set"
    if not STAMP.is_file():
        return "pure: no build (scripts/build-sim-ext)"
    try:
        stamp = json.loads(STAMP.read_text())
    except (OSError, ValueError):
        return "pure: unreadable stamp"
    if stamp.get("tag") != build_tag():
        return f"pure: build is for {stamp.get('tag')}, this is {build_tag()}"
    if stamp.get("sources") != source_hashes():
        return "pure: build is stale (sources changed since; rerun scripts/build-sim-ext)"
    files: dict[str, Path] = {}
    for m in (*NATIVE_MODULES, SHARED_LIB):
        name = stamp.get("files", {}).get(m)
        f = EXT_DIR / str(name)
        if not name or not f.is_file():
            return f"pure: build incomplete ({m} missing)"
        files[f"{PKG}.{m}"] = f
    return files


def install() -> str:
    """Use the compiled modules when current (call before any of them is imported); returns the status."""
    global status
    if any(isinstance(f, _Finder) for f in sys.meta_path):
        return status
    loaded = [m for m in NATIVE_MODULES if f"{PKG}.{m}" in sys.modules]
    if loaded:
        status = f"pure: {loaded} imported before tuner.sim.native"
        return status
    files = _ext_files()
    if isinstance(files, str):
        status = files
        return status
    before = set(sys.modules)
    finder = _Finder(files)
    sys.meta_path.insert(0, finder)
    try:
        for m in NATIVE_MODULES:
            __import__(f"{PKG}.{m}")
    except Exception as e:  # noqa: BLE001  (a broken build must never break tuner.sim: fall back, same records)
        sys.meta_path.remove(finder)
        for name in set(sys.modules) - before:  # also what they imported (e.g. calibration's Calibration)
            if name.startswith(f"{PKG}."):
                del sys.modules[name]
        status = f"pure: compiled modules failed to load ({e})"
        return status
    status = "compiled (mypyc)"
    return status


def is_compiled() -> bool:
    """True when the simulator's hot modules run compiled in this process."""
    core = sys.modules.get(f"{PKG}.core")
    return core is not None and not str(getattr(core, "__file__", "")).endswith(".py")
