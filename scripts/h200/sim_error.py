"""The simulator's error on the H200 study's load points: every (config, load) measured there, replayed.

For each trial in a results folder and each load point it measured, the same workload (same seed,
rate and point length) runs through the calibrated simulator in virtual time with the trial's
engine args (tuner.load.capacity.measure_point with a VirtualTarget), and the figures are compared.
`--fit-trials` names trials whose points are in the simulator's fit set (tuner.sim.reference.FIT_SET):
their rows are marked "fit" and left out of the summary lines, which are then held-out errors.

    python scripts/h200/sim_error.py studies/h200-static-high.yaml benchmarks/results/h200/h200-static-high \
        --fit-trials 0
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tuner.load.capacity import measure_point  # noqa: E402
from tuner.load.target import VirtualTarget  # noqa: E402
from tuner.sim import SimulatedEngine  # noqa: E402
from tuner.spec.load import load_study  # noqa: E402
from tuner.trial.table import read_trials  # noqa: E402

FIGURES = ("output_throughput", "p50_ttft_ms", "p99_ttft_ms", "p50_tpot_ms", "p99_tpot_ms", "p99_e2el_ms")


def simulate(study: Any, args: dict[str, Any], load: float) -> dict[str, float]:
    flavour = "sglang" if study.engine == "sglang" else "vllm"  # the engine the study ran; the sim imitates both
    engine = SimulatedEngine(flavour=flavour, gpu="H200", shape=study.model.shape or "qwen3-8b", args=args,
                             max_model_len=study.model.max_model_len, dtype=study.model.dtype)
    point, _ = measure_point(VirtualTarget(engine), study.workload, study.sla, study.capacity, load,
                             seed=study.seed, max_model_len=study.model.max_model_len, base_dir=REPO)
    return point.summary


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("study", type=Path)
    p.add_argument("results", type=Path)
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--fit-trials", type=int, nargs="*", default=[], help="trials whose points the fit used")
    a = p.parse_args(argv)
    study = load_study(a.study)
    rows = []
    for t in read_trials(a.results / "trials.parquet"):
        for pt in t.points:
            if pt.get("stopped_early"):
                continue
            sim = simulate(study, t.args, float(pt["load"]))
            row = {"trial": t.number, "args": t.args, "load": pt["load"], "fit": t.number in a.fit_trials}
            for f in FIGURES:
                m, s = pt.get(f), sim.get(f)
                row[f] = {"measured": m, "sim": s, "rel_err": (s - m) / m if m and s is not None else None}
            rows.append(row)
    print(f"| trial | set | config | req/s | {' | '.join(f'{f} meas / sim (err)' for f in FIGURES)} |")
    print("|---|---|---|---|" + "---|" * len(FIGURES))
    for r in rows:
        cfg = ", ".join(f"{k}={v}" for k, v in r["args"].items()) or "defaults"
        cells = [f"{r[f]['measured']:.0f} / {r[f]['sim']:.0f} ({r[f]['rel_err']:+.0%})"
                 if r[f]["rel_err"] is not None else "-" for f in FIGURES]
        print(f"| {r['trial']} | {'fit' if r['fit'] else 'held'} | {cfg} | {r['load']:g} | {' | '.join(cells)} |")
    for f in FIGURES:
        errs = [abs(r[f]["rel_err"]) for r in rows if r[f]["rel_err"] is not None and not r["fit"]]
        if errs:
            print(f"- held out, {f}: mean |error| {sum(errs) / len(errs):.1%}, max {max(errs):.1%} "
                  f"over {len(errs)} points")
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
