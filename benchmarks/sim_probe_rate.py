"""Is a trial's best load point as good a host probe as a low-rate run? (issue 17; the sim gate's host fit)

Why: `servetune host` was checked with each server's lowest-rate run as the probe (sim_host_probe.py --confirm,
sim_fresh.py). The simulator gate of a real-engine study fits the host on the first measured trial's records, which
hold its best load point: near the SLA, a high rate. Here, on every server of benchmarks/results/gpu-fresh and
gpu-confirm with three or more runs, the host factors are fitted once on its lowest-rate run and once on its
highest, and the runs in between are predicted with each (shipped calibration, one draw). An analysis, not a rule:
both data sets had been looked at before it ran.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/sim_probe_rate.py   # output results/sim/sim_probe_rate.txt
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.sim_blind import measured, simulate
from benchmarks.sim_confirm import gpu_of
from benchmarks.sim_fidelity import medians
from benchmarks.sim_fresh import CONFIRM, FRESH, SHIP, servers
from tuner.sim.detailed import load_json
from tuner.sim.host import RULE_STEP_GRID, apply_host, fit_host
from tuner.sim.reference import errors_pct


def main() -> None:
    for root in (FRESH, CONFIRM):
        pooled: dict[str, list[dict[str, float]]] = {"shipped": [], "low": [], "high": []}
        for server, runs in servers(root).items():
            if len(runs) < 3:
                continue
            gpu, middle = gpu_of(root / server), runs[1:-1]
            cals = {"shipped": SHIP}
            for which, probe in (("low", runs[0]), ("high", runs[-1])):
                fit = fit_host(load_json(probe[0]), probe[1], gpu, probe[2], base=SHIP, step_grid=RULE_STEP_GRID)
                cals[which] = apply_host(SHIP, fit.launch, fit.step)
                print(f"{server} probe {which:4s} {probe[0].name:24s} launch x{fit.launch:.2f} step x{fit.step:.2f}",
                      flush=True)
            for f, shape, args in middle:
                d = load_json(f)
                for which, cal in cals.items():
                    sim, _ = simulate(d, shape, args, cal, gpu=gpu)
                    pooled[which].append(errors_pct(sim, measured(d)))
        for which, rows in pooled.items():
            print(f"{root.name} middle runs points={len(rows)} probe={which} median_abs_error_pct: {medians(rows)}")


if __name__ == "__main__":
    main()
