"""How far apart two runs of the same point can read their P99s: the noise floor of a P99 comparison (issue 17).

A Poisson run of n prompts is one draw of the arrival process; its P99 TTFT is about its (n/100)-th largest TTFT
and its P99 ITL is set by the few steps that carry several new prompts. For each point this simulates `--draws`
other arrival draws (vllm bench's gap rule, other seeds) with the point's own n and prints the spread of the
simulated P99 TTFT / ITL / TPOT: the 5-95 % range and the median |difference| between two independent draws
(the error one would see with a perfect simulator, from the draw alone). Where a detailed set measured the same
shape and rate with more prompts (the np400 set), its first 150 requests (sent on the same client draw as the
150-prompt run, `vllm bench serve --seed 0`) are also compared with the 150-prompt run's P99s: a measured repeat.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/p99_noise.py [--draws 30]
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tuner.sim.detailed import run_distribution
from tuner.sim.engine import SimulatedEngine
from tuner.sim.reference import ALL_POINTS, RefPoint, detailed_run, figures, measured, split_of, workload

KEYS = ("p99_ttft_ms", "p99_itl_ms", "p99_tpot_ms")


def draw_spread(p: RefPoint, draws: int) -> dict[str, tuple[float, float, float]]:
    """Per figure: (5th percentile, 95th percentile, median pairwise |a/b - 1| in %) over `draws` arrival draws."""
    eng = SimulatedEngine(flavour="vllm", gpu="H200", shape=p.shape, args=p.args, max_model_len=p.max_model_len)
    runs = [figures(eng.run(workload(p, seed))) for seed in range(100, 100 + draws)]
    out = {}
    for k in KEYS:
        v = np.array([r[k] for r in runs])
        pair = [abs(a / b - 1) * 100 for a, b in itertools.combinations(v, 2)]
        out[k] = (float(np.percentile(v, 5)), float(np.percentile(v, 95)), float(np.median(pair)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=30)
    a = ap.parse_args()
    points = [p for p in ALL_POINTS if split_of(p) == "shape" or p.name in ("default_r4", "default_r6", "default_r7.5")]
    print(f"simulated P99 over {a.draws} other arrival draws of each point (n = its prompts): 5-95 % range, and the "
          "median |difference| between two draws (%)")
    print(f"{'point':28s} {'n':>4s} " + " ".join(f"{k:>30s}" for k in KEYS))
    for p in points:
        sp = draw_spread(p, a.draws)
        print(f"{p.name:28s} {p.prompts:4d} " + " ".join(
            f"{sp[k][0]:7.1f}-{sp[k][1]:7.1f} pair {sp[k][2]:5.1f}%" for k in KEYS))
    # measured repeats: the first 150 requests of a longer detailed run vs the 150-prompt run, same shape and rate
    short = {(p.shape, p.rate): p for p in ALL_POINTS if p.prompts == 150 and p.set_name.endswith("qwen3-14b")}
    for p in ALL_POINTS:
        run = detailed_run(p)
        if run is None or (p.shape, p.rate) not in short or len(run) <= 150:
            continue
        first = run_distribution(run, np.arange(150))
        whole = run_distribution(run)
        ref = measured(short[(p.shape, p.rate)])
        print(f"measured repeat {p.name} (n={len(run)}): P99 TTFT first 150 {first['ttft'][-1]:6.1f} / all "
              f"{whole['ttft'][-1]:6.1f} / 150-prompt run {ref['p99_ttft_ms']:6.1f} ms; P99 ITL first 150 "
              f"{first['itl'][-1]:6.1f} / all {whole['itl'][-1]:6.1f} / 150-prompt run {ref['p99_itl_ms']:6.1f} ms")


if __name__ == "__main__":
    main()
