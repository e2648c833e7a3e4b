"""Simulated vs measured figures for every reference configuration; error on the held-out ones.

For each point in tuner/sim/reference.py (real vLLM 0.26.0 on one H200, copied under
benchmarks/reference/), prints simulated / measured output tok/s, P50/P99 TTFT and P50/P99 TPOT
with the absolute error in percent. Points in FIT_SET were used by benchmarks/calibrate_sim.py;
the rest are held out. Last line: `median_abs_error_pct=X heldout=K` (K held-out points; the
median is over all their figures).

    .venv/bin/python benchmarks/sim_fidelity.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tuner.sim.reference import ALL_POINTS, FIT_SET, METRICS, errors_pct, measured, simulate

SHORT = {"output_throughput": "tok/s", "p50_ttft_ms": "TTFT50", "p99_ttft_ms": "TTFT99",
         "p50_tpot_ms": "TPOT50", "p99_tpot_ms": "TPOT99"}


def main() -> None:
    t0 = time.process_time()
    held: list[float] = []
    fit: list[float] = []
    unseen: list[float] = []  # held-out points whose engine config appears nowhere in the fit set
    fit_cfgs = {name.rsplit("_r", 1)[0] if "_r" in name and name[-1].isdigit() else name for name in FIT_SET}
    print(f"{'point':18s} {'set':4s} " + " ".join(f"{SHORT[m]:>22s}" for m in METRICS))
    for p in ALL_POINTS:
        sim, real = simulate(p), measured(p)
        err = errors_pct(sim, real)
        tag = "fit" if p.name in FIT_SET else "held"
        (fit if tag == "fit" else held).extend(err.values())
        cfg = p.name.rsplit("_r", 1)[0] if p.rate > 0 and "_r" in p.name else p.name
        if tag == "held" and cfg not in fit_cfgs and not cfg.startswith("default"):
            unseen.extend(err.values())
        cells = " ".join(f"{sim[m]:>8.1f}/{real[m]:>8.1f} {err[m]:3.0f}%" for m in METRICS)
        print(f"{p.name:18s} {tag:4s} {cells}")
    n_held = sum(1 for p in ALL_POINTS if p.name not in FIT_SET)
    print(f"fit median_abs_error_pct={statistics.median(fit):.1f}; "
          f"unseen-config held-out median_abs_error_pct={statistics.median(unseen):.1f} "
          f"({len(unseen) // len(METRICS)} points); cpu_s={time.process_time() - t0:.2f}")
    print(f"median_abs_error_pct={statistics.median(held):.1f} heldout={n_held}")


if __name__ == "__main__":
    main()
