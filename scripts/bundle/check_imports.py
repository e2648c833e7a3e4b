#!/usr/bin/env python3
"""On the target, after install.sh unpacked the bundle: (1) the image's own packages meet what the
carried wheels ask of them; (2) every module listed in manifest.json imports. Exit 1 on any failure.
Runs with the bundle's tree first on sys.path (install.sh sets PYTHONPATH)."""

from __future__ import annotations

import importlib
import importlib.metadata as md
import json
import sys
import time
import traceback
from pathlib import Path


def check_versions(manifest: dict) -> list[str]:
    try:
        from packaging.requirements import Requirement
    except ImportError:
        return ["packaging is not importable: cannot check the image's versions"]
    bad = []
    for item in manifest.get("target_requirements", []):
        req = Requirement(item["req"])
        try:
            have = md.version(req.name)
        except md.PackageNotFoundError:
            bad.append(f"{item['by']} needs {req}: not installed on this host")
            continue
        if not req.specifier.contains(have, prereleases=True):
            bad.append(f"{item['by']} needs {req}: this host has {req.name} {have}")
    return bad


def check_imports(modules: list[str]) -> list[str]:
    bad = []
    for name in modules:
        t0 = time.monotonic()
        try:
            importlib.import_module(name)
        except BaseException as exc:  # noqa: BLE001 - SystemExit/ImportError alike: report and go on
            last = traceback.format_exception_only(type(exc), exc)[-1].strip()
            bad.append(f"import {name}: {last}")
            continue
        if time.monotonic() - t0 > 5:
            print(f"  import {name}: {time.monotonic() - t0:.1f} s", flush=True)
    return bad


def main() -> int:
    sys.path.append(str(Path.cwd()))  # servetune itself: run from the checkout's root
    manifest = json.loads((Path(__file__).resolve().parent / "manifest.json").read_text())
    versions = check_versions(manifest)
    for line in versions:
        print("version:", line)
    mods = manifest.get("imports", [])
    if "--skip-engine" in sys.argv:
        mods = [m for m in mods if m.split(".")[0] not in manifest.get("engines", [])]
    failed = check_imports(mods)
    for line in failed:
        print("FAILED", line)
    print(f"bundle check: {len(mods) - len(failed)}/{len(mods)} modules imported, "
          f"{len(versions)} version problem(s) on this host")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
