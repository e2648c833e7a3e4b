"""Unpack the wheels into one `pip --target` tree, trim it, compress it and cut it into chunks."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import trims
from wheels import sha256

UNITS = {"": 1, "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3,
         "kib": 1024, "mib": 1024**2, "gib": 1024**3}


def parse_size(text: str) -> int:
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).lower() not in UNITS:
        raise SystemExit(f"error: --chunk-size {text!r} is not a size; fix: e.g. 40MiB, 45M, 2GiB")
    size = int(float(m.group(1)) * UNITS[m.group(2).lower()])
    if size < 1024**2:
        raise SystemExit(f"error: --chunk-size {text!r} is under 1 MiB; fix: give a larger size")
    return size


def unpack(wheels: list[Path], site: Path, python_version: str) -> None:
    if site.exists():
        shutil.rmtree(site)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                    "--only-binary=:all:", "--python-version", python_version, "--implementation", "cp",
                    "--platform", "any", *sum((["--platform", p] for p in _platforms()), []),
                    "--target", str(site), *map(str, wheels)], check=True)


def _platforms() -> list[str]:
    from wheels import PLATFORMS

    return PLATFORMS


def tree_size(site: Path) -> int:
    return sum(f.stat().st_size for f in site.rglob("*") if f.is_file())


def compress(site: Path, tarball: Path, level: str) -> None:
    """tar | xz; sorted names so the same tree gives the same tarball."""
    with tarball.open("wb") as out:
        tar = subprocess.Popen(["tar", "--sort=name", "--exclude=./.bundle-tree.json", "--owner=0", "--group=0", "--numeric-owner",
                                "--mtime=@0", "-C", str(site), "-cf", "-", "."], stdout=subprocess.PIPE)
        xz = subprocess.run(["xz", f"-{level}", "-T0", "-c"], stdin=tar.stdout, stdout=out, check=True)
        tar.stdout.close()
        if tar.wait() or xz.returncode:
            raise SystemExit("error: tar | xz failed")


def split(tarball: Path, out: Path, chunk: int) -> list[dict]:
    """Chunks chunk_000, chunk_001... of at most `chunk` bytes, each with its sha256."""
    for old in out.glob("chunk_*"):
        old.unlink()
    parts = []
    with tarball.open("rb") as f:
        i = 0
        while block := f.read(chunk):
            p = out / f"chunk_{i:03d}"
            p.write_bytes(block)
            parts.append({"file": p.name, "bytes": len(block), "sha256": sha256(p)})
            i += 1
    return parts


def write_manifest(out: Path, manifest: dict) -> None:
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    lines = [f"{p['sha256']}  {p['file']}" for p in manifest["chunks"]]
    lines.append(f"{manifest['tarball_sha256']}  {manifest['tarball']}")
    (out / "SHA256SUMS").write_text("\n".join(lines) + "\n")


__all__ = ["compress", "parse_size", "split", "tree_size", "trims", "unpack", "write_manifest"]
