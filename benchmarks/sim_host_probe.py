"""Can one low-rate run on the user's host calibrate the simulator for that host? (issue 17)

Why: the prompt step's launch, which sets the ITL tail, differs between hosts and server instances of one GPU kind by
20-50 % (benchmarks/launch_by_host.py: 19-35 ms on four H100 hosts), and the blind H100 runs
(benchmarks/sim_blind.py) miss 1.7B's decode step and prompt-step intervals by ~20-30 % where 4B and 8B hold. One
value per GPU kind cannot fit every host.

Protocol, fixed before the run (committed before its output): for each H100 server of benchmarks/sim_blind.py's sets
(q4n, q17l, q8m, and the step-trace servers q4u and q4t), its lowest-rate run is the probe. On the probe alone, two
host factors are chosen on a grid: `launch` x the prompt step's launch (prompt_cpu_step_s, prompt_cpu_layer_s), 0.5 to
1.5 by 0.05, and `step` x the fixed time of every step (o_step_s, w_floor_layer_s), 0.7 to 1.3 by 0.05, minimising the
sum over the probe's pooled per-request ITL distribution's 10/25/50/75/90/95/98/99/99.5th percentiles of |log(sim /
real)|. The server's other runs are then simulated with the shipped calibration and with the host factors. Rule: the
host probe is worth building into servetune if, over those other runs pooled, the median absolute P99 ITL and P50 TPOT
errors both drop by >= 3 points and no metric's median gets worse by more than 1 point.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/sim_host_probe.py > benchmarks/results/sim/sim_host_probe.txt
    PYTHONPATH=$PWD .venv/bin/python benchmarks/sim_host_probe.py --sets q4n q17l q8m q4t q14d  # + the 14B set
    # measured after this rule was run (output sim_host_probe_q14d.txt; not part of the rule)
    PYTHONPATH=$PWD .venv/bin/python benchmarks/sim_host_probe.py --confirm  # output sim_host_probe_confirm.txt

Second check, `--confirm` (2026-12-06, fixed before its run; commit before its output): the same protocol on the six
H100 servers of benchmarks/results/gpu-confirm (c8, c17, c14, c4 and the second servers c8i2, c17i2; measured for
sim_confirm.py, on a host whose small models' P99 TTFT and P99 ITL the shipped simulator over-predicts by 40-190 %:
sim_confirm.txt), with the launch grid extended down to 0.2 (0.2 to 1.5 by 0.05: on that host the real P99 ITL of
1.7B is 14-17 ms where the simulator's launch alone is 30 ms). Same rule as above, on the pooled other runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.sim_blind import measured, points, simulate
from benchmarks.sim_fidelity import SHORT, medians
from tuner.sim.calibration import FITTED
from tuner.sim.detailed import load_json
from tuner.sim.host import LAUNCH_GRID, RULE_STEP_GRID, apply_host, fit_host
from tuner.sim.reference import METRICS, errors_pct

LAUNCH = tuple(round(0.5 + 0.05 * i, 2) for i in range(21))  # the first rule's grid; --confirm: tuner.sim.host's
CONFIRM = Path(__file__).resolve().parent / "results" / "gpu-confirm"
RULE_SETS = ("q4n", "q17l", "q8m", "q4t")  # sim_blind.py's sets when the rule was fixed (q4t: the q4u and q4t servers)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", nargs="+", default=list(RULE_SETS), help="benchmarks/sim_blind.py's sets to probe")
    ap.add_argument("--confirm", action="store_true", help="the gpu-confirm servers instead, launch grid from 0.2")
    a = ap.parse_args()
    sets = set(a.sets)
    servers: dict[str, list[tuple[Path, str, dict[str, object]]]] = {}
    launch_grid = LAUNCH
    if a.confirm:
        launch_grid = LAUNCH_GRID
        for d in sorted(CONFIRM.iterdir()):
            if (d / "points.json").exists():
                for p in json.loads((d / "points.json").read_text()):
                    servers.setdefault(d.name, []).append((d / p["file"], p["shape"], p["args"]))
    for name, f, shape, args in ([] if a.confirm else points()):
        if name not in sets:
            continue
        server = f.name.split("_")[1] if name == "q4t" else name  # q4t and q4u: two servers in one folder
        servers.setdefault(server, []).append((f, shape, args))
    pooled: dict[str, list[dict[str, float]]] = {"shipped": [], "host": []}
    for server, runs in servers.items():
        probe, rest = runs[0], runs[1:]
        fit = fit_host(load_json(probe[0]), probe[1], "H100", probe[2], launch_grid=launch_grid,
                       step_grid=RULE_STEP_GRID)
        best = (fit.launch, fit.step)
        print(f"server {server}: probe {probe[0].name} ({probe[1]}), host factors launch x{best[0]:.2f} step "
              f"x{best[1]:.2f}; probe ITL percentile loss {fit.loss:.3f} (shipped {fit.loss_calibrated:.3f})",
              flush=True)
        for f, shape, args in rest:
            d = load_json(f)
            real = measured(d)
            for label, cal in (("shipped", FITTED), ("host", apply_host(FITTED, *best))):
                sim, _ = simulate(d, shape, args, cal)
                err = errors_pct(sim, real)
                pooled[label].append(err)
                print(f"  {f.name.removesuffix('.json.gz'):18s} {label:8s} "
                      + "  ".join(f"{SHORT[m]} {sim[m]:.1f}/{real[m]:.1f} {err[m]:.0f}%" for m in METRICS))
    for label in ("shipped", "host"):
        print(f"other runs points={len(pooled[label])} calibration={label} median_abs_error_pct: "
              f"{medians(pooled[label])}")


if __name__ == "__main__":
    main()
