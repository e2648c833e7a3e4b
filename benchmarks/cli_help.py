"""Seconds each command takes to answer `--help` (median of 5 fresh processes): the issue-18 target is < 2 s.

    .venv/bin/python benchmarks/cli_help.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).parents[1]


def main() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for module in ("tuner.run", "tuner.bench", "tuner.promote"):
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, check=True, env=env, cwd=ROOT)
            times.append(time.perf_counter() - t0)
        print(f"{module} --help: median {statistics.median(times):.2f} s, max {max(times):.2f} s")


if __name__ == "__main__":
    main()
