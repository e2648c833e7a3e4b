"""Fit the simulator's three FP8 factors on the real H200 FP8 points, and say how well they predict.

`fp8_lin_gain` (FLOP speed of linear layers with FP8 weights vs BF16), `fp8_kv_gain` (KV reads from an
FP8 cache vs BF16) and `fp8_w_gain` (weight reads of the FP8 linear layers vs BF16: 2 = the halved bytes;
what sets small-batch decode steps) are chosen on a grid to minimise the mean |P99 TPOT error| over the
FP8 weights + KV fit points: the six 30 s Poisson points of benchmarks/reference/h200-vllm-0.26.0-fp8
(tuner.sim.reference.FP8_30S, 12-18 req/s) and the four closed-loop points at 32-64 concurrent requests of
benchmarks/results/h200-fp8-static-conc (trial 1; FP8_CONC); the base calibration stays as fitted by
calibrate_sim.py. Printed: the fitted triple and its errors, the leave-one-out error (each point predicted
by the triple fitted on the others), and held-out checks: the 150-prompt points (the base simulator
under-states short runs' TPOT as much with BF16 as with FP8: compare within a row) and the FP8 trials of
the dynamic-workload study benchmarks/results/h200/h200-fp8-dynamic (6-16 req/s, never fitted on).
`--write` puts the triple into tuner/sim/calibration.py.

    .venv/bin/python benchmarks/calibrate_fp8.py [--jobs 2] [--write]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import re
import statistics
import sys
from multiprocessing import Pool
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tuner.sim.calibration import FITTED  # noqa: E402
from tuner.sim.reference import (  # noqa: E402
    FP8_30S,
    FP8_BOTH,
    FP8_SHORT,
    measured,
    simulate,
    simulate_study_point,
    study_points,
)

LIN = (1.2, 1.3, 1.35, 1.4, 1.5, 1.6)
KV = (1.2, 1.3, 1.4, 1.5, 1.6)
W = (1.0, 1.1, 1.2, 1.4, 1.6, 2.0)
FP8_CONC = tuple(sp for sp in study_points("benchmarks/results/h200-fp8-static-conc") if sp.args == FP8_BOTH)
HELD_DYNAMIC = tuple(sp for sp in study_points("benchmarks/results/h200/h200-fp8-dynamic")
                     if dict(sp.args).get("quantization") == "fp8")
CAL_FILE = ROOT / "tuner" / "sim" / "calibration.py"


def _p99_tpot(job: tuple[tuple[float, float, float], int]) -> float:
    """|P99 TPOT error| in % of fit point i under the gains g (one unit of parallel work)."""
    g, i = job
    cal = dataclasses.replace(FITTED, fp8_lin_gain=g[0], fp8_kv_gain=g[1], fp8_w_gain=g[2])
    if i < len(FP8_30S):
        p = FP8_30S[i]
        return abs(simulate(p, cal)["p99_tpot_ms"] / measured(p)["p99_tpot_ms"] - 1) * 100
    sp = FP8_CONC[i - len(FP8_30S)]
    return abs(simulate_study_point(sp, cal)["p99_tpot_ms"] / dict(sp.real)["p99_tpot_ms"] - 1) * 100


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--jobs", type=int, default=1, help="processes evaluating the grid in parallel")
    a = ap.parse_args()
    names = [p.name for p in FP8_30S] + [sp.name for sp in FP8_CONC]
    combos = list(itertools.product(LIN, KV, W))
    jobs = [(g, i) for g in combos for i in range(len(names))]
    if a.jobs > 1:
        with Pool(a.jobs) as pool:
            errs = pool.map(_p99_tpot, jobs, chunksize=8)
    else:
        errs = [_p99_tpot(j) for j in jobs]
    grid = {g: errs[k * len(names):(k + 1) * len(names)] for k, g in enumerate(combos)}
    best = min(grid, key=lambda g: statistics.mean(grid[g]))
    print(f"fitted fp8_lin_gain={best[0]} fp8_kv_gain={best[1]} fp8_w_gain={best[2]}: mean |P99 TPOT error| "
          f"{statistics.mean(grid[best]):.1f}% over {len(names)} points (the old pair with fp8_w_gain=2: "
          f"{statistics.mean(grid.get((1.35, 1.4, 2.0), [float('nan')])):.1f}%)")
    loo = []
    for i, name in enumerate(names):
        g = min(grid, key=lambda g: statistics.mean(e for j, e in enumerate(grid[g]) if j != i))
        loo.append(grid[g][i])
        print(f"  {name}: in-sample error {grid[best][i]:.1f}%, left out (fit {g}): {grid[g][i]:.1f}%")
    print(f"fp8_loo_err_pct={statistics.mean(loo):.1f}")
    cal = dataclasses.replace(FITTED, fp8_lin_gain=best[0], fp8_kv_gain=best[1], fp8_w_gain=best[2])
    for p in FP8_SHORT:
        m, s = measured(p), simulate(p, cal)
        print(f"  held out, short {p.name}: P99 TPOT real {m['p99_tpot_ms']:.1f} sim {s['p99_tpot_ms']:.1f} ms")
    held = []
    for sp in HELD_DYNAMIC:
        s, m = simulate_study_point(sp, cal), dict(sp.real)
        e = {f: abs(s[f] / m[f] - 1) * 100 for f in ("p50_tpot_ms", "p99_tpot_ms")}
        held.append(e)
        print(f"  held out, {sp.name}: P50 TPOT real {m['p50_tpot_ms']:.1f} sim {s['p50_tpot_ms']:.1f} ms, "
              f"P99 TPOT real {m['p99_tpot_ms']:.1f} sim {s['p99_tpot_ms']:.1f} ms")
    print(f"fp8_dynamic_heldout_p50_tpot_err_pct={statistics.median(e['p50_tpot_ms'] for e in held):.1f} "
          f"fp8_dynamic_heldout_p99_tpot_err_pct={statistics.median(e['p99_tpot_ms'] for e in held):.1f} "
          f"points={len(held)} (medians)")
    if a.write:
        text = CAL_FILE.read_text()
        for key, v in zip(("fp8_lin_gain", "fp8_kv_gain", "fp8_w_gain"), best, strict=True):
            if f"{key}=" in text:
                text = re.sub(rf"{key}=[0-9.e+-]+", f"{key}={v:g}", text)
            else:
                text = text.replace("\n)", f"\n    {key}={v:g},\n)")
        CAL_FILE.write_text(text)
        print(f"wrote {CAL_FILE}")


if __name__ == "__main__":
    main()
