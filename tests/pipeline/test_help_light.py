"""`--help` of every command answers before the heavy libraries load (the time itself: benchmarks/cli_help.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
HEAVY = ("mlflow", "ray", "pydantic", "optuna", "aiohttp", "numpy", "pyarrow", "plotly", "matplotlib")


@pytest.mark.parametrize("module", ["tuner.run", "tuner.bench", "tuner.promote"])
def test_help_imports_nothing_heavy(module: str) -> None:
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", module, "--help"], capture_output=True,
                          text=True, timeout=120, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0 and "usage:" in proc.stdout, proc.stderr[-2000:]
    loaded = {line.split("|")[-1].strip().split(".")[0] for line in proc.stderr.splitlines() if "|" in line}
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


@pytest.mark.parametrize(("argv", "usage"), [
    (["-m", "tuner.cli", "run", "--help"], "usage: servetune run "),
    (["-m", "tuner.cli", "bench", "--help"], "usage: servetune bench "),
    (["-m", "tuner.cli", "promote", "--help"], "usage: servetune promote "),
    (["-m", "tuner.cli", "sim", "--help"], "usage: servetune sim "),
    (["-m", "tuner.run", "--help"], "usage: python -m tuner.run "),
    (["-m", "tuner.bench", "--help"], "usage: python -m tuner.bench "),
    (["-m", "tuner.promote", "--help"], "usage: python -m tuner.promote "),
    (["-m", "tuner.sim.server", "--help"], "usage: python -m tuner.sim.server "),
    (["-m", "tuner", "--help"], "usage: python -m tuner "),
])
def test_usage_names_the_command_as_invoked(argv: list[str], usage: str) -> None:
    proc = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith(usage), proc.stdout[:300]
