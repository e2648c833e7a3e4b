"""Fit the simulator's two FP8 factors on the real H200 FP8 points, and say how well they predict.

`fp8_lin_gain` (linear layers with FP8 weights vs BF16) and `fp8_kv_gain` (KV reads from an FP8 cache
vs BF16) are chosen on a grid to minimise the mean |P99 TPOT error| over the six 30 s Poisson points of
benchmarks/reference/h200-vllm-0.26.0-fp8 (tuner.sim.reference.FP8_30S; the base calibration stays as
fitted by calibrate_sim.py). Printed: the fitted pair and its errors, the leave-one-out error (each
point predicted by the pair fitted on the other five), and the 150-prompt points as a further check
(the base simulator under-states short runs' TPOT as much with BF16 as with FP8: compare within a row).
`--write` puts the pair into tuner/sim/calibration.py.

    .venv/bin/python benchmarks/calibrate_fp8.py [--write]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tuner.sim.calibration import FITTED  # noqa: E402
from tuner.sim.reference import FP8_30S, FP8_SHORT, measured, simulate  # noqa: E402

LIN = (1.2, 1.25, 1.3, 1.35, 1.4, 1.45, 1.5, 1.6, 1.8, 2.0)
KV = (1.0, 1.2, 1.3, 1.4, 1.5, 1.6, 1.8, 2.0)
CAL_FILE = ROOT / "tuner" / "sim" / "calibration.py"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args()
    real = [measured(p)["p99_tpot_ms"] for p in FP8_30S]
    grid: dict[tuple[float, float], list[float]] = {}
    for lg, kg in itertools.product(LIN, KV):
        cal = dataclasses.replace(FITTED, fp8_lin_gain=lg, fp8_kv_gain=kg)
        grid[(lg, kg)] = [abs(simulate(p, cal)["p99_tpot_ms"] / r - 1) * 100 for p, r in zip(FP8_30S, real, strict=True)]
    best = min(grid, key=lambda g: statistics.mean(grid[g]))
    print(f"fitted fp8_lin_gain={best[0]} fp8_kv_gain={best[1]}: mean |P99 TPOT error| "
          f"{statistics.mean(grid[best]):.1f}% over {len(FP8_30S)} points")
    loo = []
    for i, p in enumerate(FP8_30S):
        g = min(grid, key=lambda g: statistics.mean(e for j, e in enumerate(grid[g]) if j != i))
        loo.append(grid[g][i])
        print(f"  {p.name}: real {real[i]:.1f} ms, in-sample error {grid[best][i]:.1f}%, "
              f"left out (fit {g}): {grid[g][i]:.1f}%")
    print(f"fp8_loo_err_pct={statistics.mean(loo):.1f}")
    cal = dataclasses.replace(FITTED, fp8_lin_gain=best[0], fp8_kv_gain=best[1])
    for p in FP8_SHORT:
        m, s = measured(p), simulate(p, cal)
        print(f"  short {p.name}: P99 TPOT real {m['p99_tpot_ms']:.1f} sim {s['p99_tpot_ms']:.1f} ms")
    if a.write:
        text = CAL_FILE.read_text()
        text = re.sub(r"fp8_lin_gain=[0-9.e+-]+", f"fp8_lin_gain={best[0]:g}", text)
        text = re.sub(r"fp8_kv_gain=[0-9.e+-]+", f"fp8_kv_gain={best[1]:g}", text)
        CAL_FILE.write_text(text)
        print(f"wrote {CAL_FILE}")


if __name__ == "__main__":
    main()
