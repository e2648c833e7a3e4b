"""The simulator on a GPU it was never fitted on: Qwen3-4B on an H100 (issue 17).

Every fitted term comes from H200 runs (and the Qwen3-4B-left-out fit, `shape_calibration("qwen3-4b")`, has not
seen this shape either); the H100 differs in memory bandwidth (3.35 against 4.8 TB/s), KV capacity (~468k against
~874k tokens here) and host CPU. The measurements are the step-trace runs in
benchmarks/results/h100/step-trace-4b/ (vLLM 0.26.0, engine defaults, 2048/512, 300 prompts per rate, Poisson,
`--save-detailed`); the simulator is fed each run's measured send times and lengths. Above ~9 req/s the H100 is
overloaded (16 and 20 req/s preempted 24 and 34 times): those rows test the KV and preemption model more than the
step costs. Prints sim / real and the absolute error per metric, then the median absolute error per metric.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/sim_gpu_heldout.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.sim_blind import measured, simulate
from benchmarks.sim_fidelity import SHORT, medians
from tuner.sim.detailed import load_json
from tuner.sim.reference import METRICS, errors_pct, shape_calibration

DATA = Path(__file__).resolve().parent / "results" / "h100" / "step-trace-4b"


def main() -> None:
    files = sorted(DATA.glob("bench_q4*_r*.json.gz"), key=lambda f: float(f.name.split("_r")[-1].split(".json")[0]))
    print(f"{'run':24s} " + " ".join(f"{SHORT[m]:>20s}" for m in METRICS))
    rows: list[dict[str, float]] = []
    for f in files:
        data = load_json(f)
        real = measured(data)
        sim, _ = simulate(data, "qwen3-4b", {}, shape_calibration("qwen3-4b"))
        rows.append(err := errors_pct(sim, real))
        print(f"{f.name.removesuffix('.json.gz'):24s} "
              + " ".join(f"{sim[m]:8.1f}/{real[m]:8.1f} {err[m]:3.0f}%" for m in METRICS))
    print(f"median_abs_error_pct {medians(rows)}")


if __name__ == "__main__":
    main()
