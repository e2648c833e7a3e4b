"""Download the exact wheels for the target platform and check that together with the target image
they satisfy every requirement the carried wheels declare (read from each wheel's own METADATA)."""

from __future__ import annotations

import email.parser
import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

from closure import Need, marker_env
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

PLATFORMS = [f"manylinux_2_{n}_x86_64" for n in (34, 31, 28, 27, 26, 24, 17, 5)] + \
    ["manylinux2014_x86_64", "manylinux1_x86_64"]


def download(needs: dict[str, Need], dest: Path, python_version: str) -> dict[str, Path]:
    """One `pip download --no-deps` for all exact versions; returns name -> wheel path."""
    dest.mkdir(parents=True, exist_ok=True)
    have = {canonicalize_name(parse_wheel_filename(p.name)[0]): p for p in dest.glob("*.whl")}
    missing = [f"{n}=={needs[n].version}" for n in needs
               if n not in have or str(parse_wheel_filename(have[n].name)[1]) != str(Version(needs[n].version))]
    if missing:
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
               "--python-version", python_version, "--implementation", "cp", "-d", str(dest)]
        for p in PLATFORMS:
            cmd += ["--platform", p]
        subprocess.run(cmd + missing, check=True)
    out: dict[str, Path] = {}
    for p in dest.glob("*.whl"):
        name, ver = parse_wheel_filename(p.name)[:2]
        n = canonicalize_name(name)
        if n in needs and ver == Version(needs[n].version):
            out[n] = p
    lost = sorted(set(needs) - set(out))
    if lost:
        raise SystemExit(f"error: no wheel downloaded for {lost}; fix: check the versions in the lock")
    return out


def metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1)
        return email.parser.Parser().parsestr(z.read(name).decode())


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check(wheels: dict[str, Path], target: dict[str, str | None], python_version: str,
          extras: dict[str, set[str]]) -> tuple[list[tuple[str, str]], list[dict[str, str]]]:
    """Every requirement of every carried wheel (markers for the target; extras asked for) is met by
    the bundle or by the image. Returns (problems as (wheel, text), what is asked of the image's
    packages, for install.sh to check against the real versions on the host)."""
    env = marker_env(python_version)
    have = {n: parse_wheel_filename(p.name)[1] for n, p in wheels.items()}
    problems: list[tuple[str, str]] = []
    asked: list[dict[str, str]] = []
    for n, p in sorted(wheels.items()):
        for r in metadata(p).get_all("Requires-Dist") or []:
            req = Requirement(r)
            if req.marker is not None and not any(req.marker.evaluate({**env, "extra": e})
                                                  for e in extras.get(n, set()) | {""}):
                continue
            dep = canonicalize_name(req.name)
            if dep in have:
                if not req.specifier.contains(have[dep], prereleases=True):
                    problems.append((n, f"{n} needs {req}; the bundle carries {dep}=={have[dep]}"))
            elif dep in target:
                asked.append({"by": f"{n}=={have[n]}", "req": f"{req.name}{req.specifier}"})
                ver = target[dep]
                if ver is not None and not req.specifier.contains(Version(ver), prereleases=True):
                    problems.append((n, f"{n} needs {req}; the target has {dep}=={ver}"))
            else:
                problems.append((n, f"{n} needs {req}: neither carried nor on the target"))
    return problems, asked
