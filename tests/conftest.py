"""Shared test helpers: run the CLI as a real subprocess, small studies derived from the default one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.ci_guard import pytest_runtest_makereport  # noqa: F401 - the hook: a needed component skipped in CI fails

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args: str, cwd: Path | None = None, timeout: float = 600, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
    """`python -m tuner.run ...` as a user runs it (its own process, its own local Ray)."""
    # RAY_ADDRESS=local: each CLI run starts its own Ray, never joining a cluster another test started.
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_ADDRESS": "local", **(env or {})}
    return subprocess.run([sys.executable, "-m", "tuner.run", *args], cwd=cwd or ROOT, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def small_study(tmp: Path, name: str = "small", **changes: Any) -> Path:
    """The default study with a short budget, written to tmp; `changes` replace top-level keys."""
    data = yaml.safe_load((ROOT / "studies" / "default.yaml").read_text())
    data["name"] = name
    data["capacity"] = {**data["capacity"], "requests_per_point": 120, "max_points": 5}
    data["budget"] = {"trials": 3, "max_concurrent": 2}
    data["promotion"] = {"confirm_runs": 1, "top_k": 1}
    data.update(changes)
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture
def study_factory(tmp_path: Path):
    def make(**changes: Any) -> Path:
        return small_study(tmp_path, **changes)

    return make
