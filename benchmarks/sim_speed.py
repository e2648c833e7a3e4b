"""Simulated requests per CPU-second in virtual time, on the default study's workload.

Loads studies/default.yaml (the seeds' dynamic mix: customer service 320+-120, documents
4200+-1800, code 1024+-600 input tokens at 3:5:2, Poisson arrivals; tuner.load.workload makes the
requests), then runs the simulator's default config and a few tuned ones over a ladder of Poisson
rates from light load to far past saturation, like a capacity search does. Timing is CPU time of
`SimulatedEngine.run` only (request generation excluded). Last line: `sim_requests_per_cpu_s=N`.
The first line says whether the simulator's compiled modules ran (scripts/build-sim-ext; tuner/sim/native.py)
or pure Python (no current build, or SERVETUNE_SIM_PURE=1).

    .venv/bin/python benchmarks/sim_speed.py [--requests 300] [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tuner.load.workload import generate
from tuner.sim import SimulatedEngine, native, shape_for
from tuner.spec.load import load_study

ROOT = Path(__file__).resolve().parents[1]
RATES = (1.0, 2.0, 4.0, 6.0, 8.0, 12.0, 16.0, 32.0)
CONFIGS = (
    {},
    {"max_num_seqs": 64},
    {"max_num_seqs": 256, "max_num_batched_tokens": 4096},
    {"max_num_batched_tokens": 16384, "gpu_memory_utilization": 0.85},
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=300, help="measured requests per load point")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    print(f"simulator: {native.status}")
    study = load_study(ROOT / "studies" / "default.yaml")
    mml = study.model.max_model_len
    shape = study.model.shape or shape_for(study.model.name)
    loads = {rate: generate(study.workload, n=a.requests, rate=rate, seed=study.seed, max_model_len=mml)
             for rate in RATES}
    total_req = 0
    total_cpu = 0.0
    total_tokens = 0
    for args in CONFIGS:
        eng = SimulatedEngine(flavour=study.sim.flavour, gpu=study.sim.gpu, shape=shape, args=args,
                              max_model_len=mml)
        cfg_req, cfg_cpu = 0, 0.0
        for reqs in loads.values():
            for _ in range(a.repeat):
                t0 = time.process_time()
                recs = eng.run(reqs)
                cfg_cpu += time.process_time() - t0
                cfg_req += len(reqs)
            total_tokens += sum(len(r.token_times) for r in recs)
        print(f"config {args or 'defaults'}: {cfg_req} requests over rates {list(RATES)} in {cfg_cpu:.3f} cpu-s "
              f"= {cfg_req / cfg_cpu:,.0f} req/cpu-s")
        total_req += cfg_req
        total_cpu += cfg_cpu
    print(f"token times produced per pass: {total_tokens:,}; every point run {a.repeat} times, all counted")
    print(f"sim_requests_per_cpu_s={total_req / total_cpu:.0f}")


if __name__ == "__main__":
    main()
