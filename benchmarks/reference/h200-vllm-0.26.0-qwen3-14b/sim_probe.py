"""Why the Qwen3-14B points miss: the simulator's tail figures under send-time jitter and without its
prompt-deferral terms (a diagnosis only; nothing here is fitted or used by the simulator).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/reference/h200-vllm-0.26.0-qwen3-14b/sim_probe.py
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tuner.load.records import Request
from tuner.sim.calibration import FITTED
from tuner.sim.engine import SimulatedEngine
from tuner.sim.reference import ALL_POINTS, Q14B_POINTS, errors_pct, figures, measured, simulate, workload

POINTS = [*Q14B_POINTS, *(p for p in ALL_POINTS if p.name in ("default_r4", "default_r6", "default_r7.5"))]
TAIL = ("p50_ttft_ms", "p99_ttft_ms", "p99_itl_ms")


def prompt_step_costs() -> None:
    """A step of n decodes (1,800 context tokens each) with and without one or two 2048-token prompts."""
    for shape in ("qwen3-8b", "qwen3-14b"):
        c = SimulatedEngine(flavour="vllm", gpu="H200", shape=shape, args={}, max_model_len=40960).cost
        n, ctx = 25, 25 * 1800.0
        base = c.step(n, n, ctx, ctx, True)
        for k in (1, 2):
            p = 2048 * k
            full = c.step(n + p, n + k, ctx + k * 2048 * 2049 / 2, ctx, False)
            print(f"{shape:10s} {n} decodes + {k} prompt(s): base {base * 1e3:5.1f} ms, step {full * 1e3:6.1f} ms, "
                  f"prompt extra {(full - base) * 1e3:6.1f} ms")


def jitter() -> None:
    """12 runs with a 0-20 ms send lag per request: is a miss systematic or the draw's tail?"""
    for p in POINTS:
        eng = SimulatedEngine(flavour="vllm", gpu="H200", shape=p.shape, args=p.args, max_model_len=p.max_model_len)
        base = workload(p)
        runs = []
        for k in range(12):
            lag = np.random.default_rng(100 + k).uniform(0.0, 0.02, len(base))
            runs.append(figures(eng.run([Request(r.id, r.arrival_s + float(d), r.input_len, r.output_len)
                                         for r, d in zip(base, lag, strict=True)])))
        real = measured(p)
        cells = " ".join(f"{m} real {real[m]:6.1f} sim {min(r[m] for r in runs):6.1f}-{max(r[m] for r in runs):6.1f}"
                         for m in TAIL)
        print(f"jitter {p.name:18s} {cells}")


def variants() -> None:
    """The prompt-deferral terms (fitted on Qwen3-8B per-request token times) off or rescaled."""
    cals = {
        "fitted": FITTED,
        "no_lead_cap": dataclasses.replace(FITTED, prompt_lead_max_s=0.0),
        "lead_cap_x1.87": dataclasses.replace(FITTED, prompt_lead_max_s=FITTED.prompt_lead_max_s * 1.87),
        "no_defer": dataclasses.replace(FITTED, prompt_defer=0.0, prompt_lead_max_s=0.0),
    }
    for name, cal in cals.items():
        for p in POINTS:
            sim, real = simulate(p, cal), measured(p)
            err = errors_pct(sim, real)
            cells = " ".join(f"{m} {sim[m]:6.1f}/{real[m]:6.1f} {err[m]:3.0f}%" for m in (*TAIL, "p99_tpot_ms"))
            print(f"{name:15s} {p.name:18s} {cells}")


if __name__ == "__main__":
    prompt_step_costs()
    jitter()
    variants()
