"""scripts/bundle: the closure walk, chunking with checksums, and install.sh putting chunks together
when they arrive in separate transfers (real tar, xz, sha256sum and bash; no network)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "bundle"))

import closure  # noqa: E402
import pack  # noqa: E402
from wheels import sha256  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("xz") is None or shutil.which("sha256sum") is None,
                                reason="needs xz and sha256sum")


def test_walk_leaves_out_what_the_target_has_and_reports_conflicts() -> None:
    versions = {"a": ("1.0", "ref"), "b": ("1.5", "ref"), "c": ("3.0", "ref"), "d": ("0.1", "ref")}
    requires = {"a": ["b<2", "c>=2", "d; python_version < '3.0'", "e; extra == 'x'"], "c": ["b>=1"]}
    needs, problems = closure.walk([Requirement("a>=1")], versions, requires, {"b": None}, "3.12")
    assert sorted(needs) == ["a", "c"]  # b: on the target; d: marker false; e: extra not asked for
    assert problems == []
    needs, problems = closure.walk([Requirement("a>=2")], versions, requires, {"b": "2.5"}, "3.12")
    assert any("a>=2" in p and "a==1.0" in p for p in problems)  # the version taken does not fit
    assert "b" in needs  # the target's b 2.5 does not fit b<2: carried
    needs, problems = closure.walk([Requirement("a[x]")], versions, requires, {"b": None}, "3.12")
    assert any(p.startswith("e ") and "neither" in p for p in problems)  # asked for, found nowhere


@pytest.mark.parametrize("text", ["12", "0.5MiB", "40 parsecs", ""])
def test_chunk_size_must_be_a_size_of_at_least_one_mib(text: str) -> None:
    with pytest.raises(SystemExit):
        pack.parse_size(text)
    assert pack.parse_size("40MiB") == 40 * 1024**2 and pack.parse_size("1.5G") == 1_500_000_000


def _bundle(tmp: Path) -> tuple[Path, list[dict]]:
    site = tmp / "site"
    (site / "pkg_x").mkdir(parents=True)
    (site / "pkg_x" / "__init__.py").write_text("VALUE = 42\n")
    (site / "pkg_x" / "blob.bin").write_bytes(os.urandom(300_000))  # incompressible: several chunks
    out = tmp / "bundle"
    out.mkdir()
    tarball = tmp / "site.tar.xz"
    pack.compress(site, tarball, "1")
    parts = pack.split(tarball, out, 100_000)
    manifest = {"chunks": parts, "tarball": "site.tar.xz", "tarball_sha256": sha256(tarball), "engines": [],
                "imports": ["pkg_x"], "target_requirements": [{"by": "pkg_x==1", "req": "packaging>=1"}]}
    pack.write_manifest(out, manifest)
    for f in ("install.sh", "check_imports.py"):
        shutil.copy2(ROOT / "scripts" / "bundle" / f, out / f)
    return out, parts


def _install(bundle: Path, tmp: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(bundle / "install.sh"), "--dest", str(tmp / "dest"), "--stash",
                           str(tmp / "stash"), *extra], capture_output=True, text=True, timeout=120, cwd=tmp,
                          env={**os.environ, "PYTHON": sys.executable})


def test_chunks_arriving_one_transfer_at_a_time_are_checked_joined_and_imported(tmp_path: Path) -> None:
    full, parts = _bundle(tmp_path)
    assert len(parts) >= 3 and all(p["bytes"] <= 100_000 for p in parts)
    meta = ("SHA256SUMS", "manifest.json", "install.sh", "check_imports.py")
    for i, part in enumerate(parts):  # each transfer holds one chunk beside the small files
        one = tmp_path / f"transfer{i}"
        one.mkdir()
        for f in (*meta, part["file"]):
            shutil.copy2(full / f, one / f)
        r = _install(one, tmp_path, *(["--check"] if i == len(parts) - 1 else []))
        assert r.returncode == 0, r.stderr
        if i < len(parts) - 1:
            assert f"have {i + 1} of {len(parts)} chunks" in r.stdout
    assert "unpacked" in r.stdout and "bundle check: 1/1 modules imported, 0 version problem(s)" in r.stdout
    assert (tmp_path / "dest" / "pkg_x" / "__init__.py").read_text() == "VALUE = 42\n"
    assert f"export PYTHONPATH={tmp_path / 'dest'}" in (tmp_path / "dest" / "env.sh").read_text()
    again = _install(full, tmp_path)
    assert again.returncode == 0 and "already installed" in again.stdout


def test_a_damaged_chunk_is_refused_before_anything_is_unpacked(tmp_path: Path) -> None:
    full, parts = _bundle(tmp_path)
    damaged = full / parts[1]["file"]
    data = bytearray(damaged.read_bytes())
    data[10] ^= 0xFF
    damaged.write_bytes(bytes(data))
    r = _install(full, tmp_path)
    assert r.returncode == 2 and f"{parts[1]['file']} is damaged" in r.stderr
    assert not (tmp_path / "dest").exists()


def test_a_failing_import_and_a_too_old_host_package_are_reported(tmp_path: Path) -> None:
    full, _ = _bundle(tmp_path)
    m = json.loads((full / "manifest.json").read_text())
    m["imports"].append("pkg_that_is_not_there")
    m["target_requirements"].append({"by": "pkg_x==1", "req": "packaging>=999"})
    (full / "manifest.json").write_text(json.dumps(m))
    r = _install(full, tmp_path, "--check")
    assert r.returncode == 1
    assert "FAILED import pkg_that_is_not_there" in r.stdout and "packaging>=999" in r.stdout
    assert "1/2 modules imported, 1 version problem(s)" in r.stdout
