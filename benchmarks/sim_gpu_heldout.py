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

from pathlib import Path

import numpy as np

from tuner.sim.detailed import bench_requests, bench_run, load_json
from tuner.sim.engine import SimulatedEngine
from tuner.sim.reference import METRICS, figures, shape_calibration

DATA = Path(__file__).resolve().parent / "results" / "h100" / "step-trace-4b"
SHORT = {"output_throughput": "tok/s", "p50_ttft_ms": "TTFT50", "p99_ttft_ms": "TTFT99", "p50_tpot_ms": "TPOT50",
         "p99_tpot_ms": "TPOT99", "p50_itl_ms": "ITL50", "p99_itl_ms": "ITL99"}


def main() -> None:
    files = sorted(DATA.glob("bench_q4*_r*.json.gz"), key=lambda f: float(f.name.split("_r")[-1].split(".json")[0]))
    print(f"{'run':24s} " + " ".join(f"{SHORT[m]:>20s}" for m in METRICS))
    errs: dict[str, list[float]] = {m: [] for m in METRICS}
    for f in files:
        data = load_json(f)
        run = bench_run(data)
        eng = SimulatedEngine(flavour="vllm", gpu="H100", shape="qwen3-4b", args={}, max_model_len=40960,
                              calibration=shape_calibration("qwen3-4b"))
        sim = figures(eng.run(bench_requests(run, np.zeros(len(run)))))
        cells = []
        for m in METRICS:
            real = float(data[m])
            err = abs(sim[m] - real) / real * 100
            errs[m].append(err)
            cells.append(f"{sim[m]:8.1f}/{real:8.1f} {err:3.0f}%")
        print(f"{f.name.removesuffix('.json.gz'):24s} " + " ".join(cells))
    print("median_abs_error_pct " + " ".join(f"{SHORT[m]}={np.median(errs[m]):.1f}" for m in METRICS))


if __name__ == "__main__":
    main()
