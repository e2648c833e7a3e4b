"""The simulator on runs measured after every calibration choice it is compared on was made (issue 17).

Why: the held-out splits of sim_fidelity.py have been looked at while forms were picked (each fit's docstring says
how), so they are no longer blind. These sets were measured on 2026-12-06 on one H100 (a GPU no term was fitted on),
after the fourth and fifth forms of benchmarks/sim_hold_fit.py were fixed, with workloads no fit has seen:
  q4n   Qwen3-4B shape, random 1024 in / 256 out, Poisson 6 / 12 / 18 / 24 req/s
  q17l  Qwen3-1.7B shape, 4096 in / 256 out, 4 / 8 / 12 / 16 req/s
  q8m   Qwen3-8B shape, 2048 in / 256 out, 4 / 8 / 12 req/s
  q14d  Qwen3-14B shape, 512 in / 1024 out, 2 / 4 / 6 req/s, 200 prompts per rate (measured last, after this
        script's first output: benchmarks/results/sim/sim_blind.txt's run without it is in git history, 61f78eb)
(vLLM 0.26.0, dummy weights, engine defaults, 300 prompts per rate, seed 0, `--save-detailed`, prefix cache reset
per rate; benchmarks/results/h100/blind/<set>/, command in its README), and the earlier H100 step-trace runs
(q4t / q4u: 4B, 2048 / 512; benchmarks/sim_gpu_heldout.py). The simulator gets each run's measured send times and
lengths. These runs are reported, never used to choose: a calibration is adopted or rejected by its fit's own rules.

Calibrations: `shipped` (tuner.sim.calibration.FITTED, what every user's study runs with), `shipped-loso` (the shape's
leave-one-shape-out calibration, tuner.sim.reference.shape_calibration: it never saw the shape), `hold` (what shipped
before sim_hold_fit.py's seventh form was adopted on 2026-12-07: its HOLD), and the all-shape calibrations of the
rejected fourth and fifth forms (benchmarks/results/sim/sim_hold_fit_window.txt, _measured.txt), over `hold` as they
were fitted. Before the seventh form, `shipped` read as `hold` does now.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/sim_blind.py > benchmarks/results/sim/sim_blind.txt
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.sim_fidelity import SHORT, medians
from benchmarks.sim_hold_fit import HOLD
from tuner.sim.calibration import FITTED
from tuner.sim.cost import Calibration
from tuner.sim.detailed import bench_requests, bench_run, load_json
from tuner.sim.engine import SimulatedEngine
from tuner.sim.reference import METRICS, errors_pct, figures, shape_calibration

H100 = Path(__file__).resolve().parent / "results" / "h100"
SETS = {"q4n": H100 / "blind" / "q4n", "q17l": H100 / "blind" / "q17l", "q8m": H100 / "blind" / "q8m",
        "q14d": H100 / "blind" / "q14d", "q4t": H100 / "step-trace-4b"}
# the all-shape calibrations of sim_hold_fit.py's fourth and fifth runs, as they differ from FITTED
CANDIDATES: dict[str, dict[str, float]] = {
    "window": {"o_step_s": 0.000381168, "o_tok_s": 1.09361e-08, "frontend_s": 0.0001, "ingress_per_seq_s": 7.55062e-05,
               "prompt_cpu_step_s": 0.0162069, "prompt_cpu_layer_s": 0.00066092, "sched_after_launch": 1,
               "ingress_s": 0.0045, "ingress_tok_s": 3e-06},
    "measured": {"o_step_s": 0.00033145, "o_tok_s": 8.26928e-09, "frontend_s": 0.0001, "ingress_per_seq_s": 7.55062e-05,
                 "prompt_launch_serial": 0.25, "sched_after_launch": 1, "ingress_s": 0.0045, "ingress_tok_s": 3e-06},
}


def points() -> list[tuple[str, Path, str, dict[str, object]]]:
    """(set, bench file, shape, engine args) of every run."""
    out = []
    for name, d in SETS.items():
        if (d / "points.json").exists():
            for p in json.loads((d / "points.json").read_text()):
                out.append((name, d / p["file"], p["shape"], p["args"]))
        else:  # the step-trace folder: Qwen3-4B, engine defaults
            rate = lambda f: float(f.name.split("_r")[-1].split(".json")[0])  # noqa: E731
            out += [(name, f, "qwen3-4b", {}) for f in sorted(d.glob("bench_q4*_r*.json.gz"), key=rate)]
    return out


def simulate(data: dict, shape: str, args: dict[str, object], cal: Calibration,
             gpu: str = "H100") -> tuple[dict[str, float], np.ndarray]:
    """A bench run's figures and pooled inter-token intervals (s) as the simulator gives them on `gpu` for the
    run's measured sends and lengths (also benchmarks/sim_host_probe.py, sim_gpu_heldout.py and sim_confirm.py)."""
    run = bench_run(data)
    eng = SimulatedEngine(flavour="vllm", gpu=gpu, shape=shape, args=args, max_model_len=40960, calibration=cal)
    recs = eng.run(bench_requests(run, np.zeros(len(run))))
    itl = np.concatenate([np.diff(np.asarray(r.token_times)) for r in recs if len(r.token_times) > 1])
    return figures(recs), itl


def measured(data: dict) -> dict[str, float]:
    return {m: float(data[m]) for m in METRICS}


def calibration(label: str, shape: str) -> Calibration:
    if label == "shipped-loso":
        return shape_calibration(shape)
    if label == "shipped":
        return FITTED
    return dataclasses.replace(HOLD, **CANDIDATES.get(label, {}))  # type: ignore[arg-type]


def main() -> None:
    runs = points()
    labels = ("shipped", "shipped-loso", "hold", *CANDIDATES)
    print(f"{'run':22s} {'calibration':13s} " + " ".join(f"{SHORT[m]:>20s}" for m in METRICS))
    errs: dict[str, dict[str, list[dict[str, float]]]] = {lb: {} for lb in labels}  # label -> group -> rows
    for name, f, shape, args in runs:
        data = load_json(f)
        real = measured(data)
        for lb in labels:
            sim, _ = simulate(data, shape, args, calibration(lb, shape))
            err = errors_pct(sim, real)
            for key in (name, "all", "new" if name != "q4t" else "old"):
                errs[lb].setdefault(key, []).append(err)
            print(f"{f.name.removesuffix('.json.gz'):22s} {lb:13s} "
                  + " ".join(f"{sim[m]:8.1f}/{real[m]:8.1f} {err[m]:3.0f}%" for m in METRICS), flush=True)
    for key in (*SETS, "new", "all"):
        for lb in labels:
            rows = errs[lb][key]
            print(f"blind set={key} points={len(rows)} calibration={lb} median_abs_error_pct: {medians(rows)}")


if __name__ == "__main__":
    main()
