"""A study's output carries servetune's lines, not Ray's or Tune's start-up chatter (unless --verbose)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli, small_study

pytestmark = pytest.mark.slow
NOISE = ("Configuration for experiment", "TensorBoard", "Token authentication is enabled", "Trial status:",
         "Using address local set in the environment")


def test_quiet_start(tmp_path: Path) -> None:
    study = small_study(tmp_path, name="quiet", budget={"trials": 1, "max_concurrent": 1},
                        promotion={"enabled": False})
    proc = run_cli("--study", str(study), "--output", str(tmp_path / "out"), env={"RAY_raylet_start_wait_time_s": "180"})
    assert proc.returncode in (0, 3), proc.stdout[-3000:] + proc.stderr[-3000:]
    both = proc.stdout + proc.stderr
    assert not [n for n in NOISE if n in both], [n for n in NOISE if n in both]
    assert "[servetune] trial" in both
