"""How many new prompts share a prefill step, measured against simulated (issue 17).

Why: step traces of vLLM 0.26.0's engine core (benchmarks/step_trace.py; Qwen3-4B on an H100,
benchmarks/results/h100/step-trace-4b/) show the client's ITL tail is the engine's own: its P99 equals the
P99 of the engine's step intervals, and the intervals at that tail are steps that carry two or more new
2048-token prompts (a step's interval grows with the prompts it prefills). So a simulator that packs fewer
prompts per step than the engine reads the ITL tail short, however right its per-step costs are.

The engine's packing is read from the client alone: first tokens of prompts prefilled in one step reach the
client together, so first-token times grouped with gaps under WINDOW_S (2 ms) give the prompts per step (checked
against the 4B trace at 16 req/s: 146 / 48 / 19 one- / two- / three-or-more-prompt steps from the client, 142 / 52
/ 21 in the engine's trace). At low rates a small model's steps are only 3-5 ms apart, and a 4 ms window merged
neighbouring steps (4B at 2 req/s read 14 % pairs; 0 % at 2 ms and at 1 ms, which give the same table above 8 req/s).
The decode tokens that reach the client with a step's first tokens carry that step's interval as their ITL: its
median per 1 / 2 / 3+ prompts is the last column pair. The simulator's records
are grouped the same way. Per detailed point (measured send times and lengths, each point's own calibration:
shape-split points use the fit that left their shape out): prompts in 1 / 2 / 3 / 4+ prompt steps, real and
simulated, and the ITL P99.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/prompt_packing.py [SET ...] [FIELD=VALUE ...]
    # default: every detailed set; FIELD=VALUE replaces a tuner.sim.fit.Calibration field (a what-if)
"""

from __future__ import annotations

import sys
from dataclasses import replace

import numpy as np

from tuner.sim.calibration import FITTED
from tuner.sim.detailed import bench_requests
from tuner.sim.engine import SimulatedEngine
from tuner.sim.reference import (
    DETAILED_SETS,
    bench_set_points,
    calibration_for,
    client_arrivals,
    detailed_run,
)

WINDOW_S = 0.002


def groups(first: np.ndarray) -> list[np.ndarray]:
    """The first-token times grouped into steps (gaps under WINDOW_S)."""
    f = np.sort(first)
    return np.split(f, np.where(np.diff(f) >= WINDOW_S)[0] + 1)


def packing(first: np.ndarray) -> np.ndarray:
    """Prompts by the number of prompts in their step: [in 1-prompt steps, 2, 3, 4+] (fractions)."""
    per = np.zeros(4)
    for g in groups(first):
        per[min(len(g), 4) - 1] += len(g)
    return per / per.sum()


def step_intervals(first: np.ndarray, tokens: list[np.ndarray]) -> list[float]:
    """Median ITL (ms) of the decode tokens that reach the client with a step's first tokens (within WINDOW_S of the
    group), for steps with 1, 2 and 3+ new prompts: the interval of the step that prefilled them, as the client sees
    it. `tokens`: each request's token arrival times."""
    t = np.concatenate([x[1:] for x in tokens if len(x) > 1])
    gap = np.concatenate([np.diff(x) for x in tokens if len(x) > 1])
    o = np.argsort(t)
    t, gap = t[o], gap[o]
    out: list[list[float]] = [[], [], []]
    for g in groups(first):
        lo, hi = np.searchsorted(t, [g[0] - WINDOW_S, g[-1] + WINDOW_S])
        out[min(len(g), 3) - 1].extend(gap[lo:hi])
    return [float(np.median(x)) * 1e3 if x else float("nan") for x in out]


def fmt(p: np.ndarray) -> str:
    return " ".join(f"{v:4.2f}" for v in p)


def main(sets: list[str], changes: dict[str, float]) -> None:
    print(f"{'point':34s} {'real 1/2/3/4+':>19s} {'sim 1/2/3/4+':>19s} {'ITL99 real':>10s} {'sim':>6s} "
          f"{'1/2/3+-prompt step ITL real':>27s} {'sim':>17s}")
    for set_name in sets:
        for pt in bench_set_points(set_name):
            run = detailed_run(pt)
            if run is None or run.start_times is None:
                continue
            reqs = bench_requests(run, client_arrivals(pt))
            eng = SimulatedEngine(flavour="vllm", gpu="H200", shape=pt.shape, args=pt.args,
                                  max_model_len=pt.max_model_len,
                                  calibration=replace(calibration_for(pt) or FITTED, **changes))
            recs = [r for r in eng.run(reqs) if r.ok]
            real_first = np.array([s + t for s, t in zip(run.start_times, run.ttfts, strict=True)])
            sim_first = np.array([r.first_token_s for r in recs])
            pr, ps = packing(real_first), packing(sim_first)
            itl_r = np.percentile(np.concatenate([np.asarray(x) for x in run.itls if x]), 99) * 1e3
            itl_s = np.percentile(np.concatenate([np.diff(r.token_times) for r in recs]), 99) * 1e3
            real_tok = [s + t + np.concatenate([[0.0], np.cumsum(x)])
                        for s, t, x in zip(run.start_times, run.ttfts, run.itls, strict=True)]
            si_r = step_intervals(real_first, real_tok)
            si_s = step_intervals(sim_first, [np.asarray(r.token_times) for r in recs])
            print(f"{pt.name:34s} {fmt(pr):>19s} {fmt(ps):>19s} {itl_r:10.1f} {itl_s:6.1f} "
                  f"{'/'.join(f'{v:.1f}' for v in si_r):>27s} {'/'.join(f'{v:.1f}' for v in si_s):>17s}")


if __name__ == "__main__":
    args = sys.argv[1:]
    kv = dict(a.split("=", 1) for a in args if "=" in a)
    main([a for a in args if "=" not in a] or list(DETAILED_SETS),
         {k: type(getattr(FITTED, k))(float(v)) for k, v in kv.items()})
