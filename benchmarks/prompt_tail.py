"""How long the step intervals that carry k new prompts are, measured vs simulated (issue 17's P99 ITL at high load).

The committed sim's P99 ITL is too low at high load on every shape (Qwen3-8B `vllm bench` 9 / 12 req/s -20.7 /
-27.3 %). Each run's pooled token times are cut into step intervals (as in prompt_steps.py); an interval is "k-next"
when it ends without a first token and the next one ends with k of them (the prompts' work came before their first
tokens: what the sim's `prompt_defer` models), "k-end" when k first tokens arrive at its own end. Printed per k:
the count and median (p90) length of k-next intervals, the median of k-end ones, and the median of k-next + the
interval after it (the whole prompt step's time, however the engine splits it); and for the intervals at or above
the run's 99th percentile, how many first tokens end them (k_end) or the next one (k_next) and the median number
of running requests. Done for the measured run, the committed sim, and the "dcap" candidate of sim_defercap.py
(no lead cap, the deferred part at most 20 ms, gpow exp 0.075: its fit on all shapes), each on the run's own sends.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/prompt_tail.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.prompt_steps import GAP_S, Timeline, from_records, from_run
from benchmarks.sim_defercap import cal_for
from tuner.load.records import Request
from tuner.sim.calibration import FITTED
from tuner.sim.cost import Calibration
from tuner.sim.detailed import bench_requests
from tuner.sim.engine import SimulatedEngine
from tuner.sim.reference import ALL_POINTS, RECORDS, RefPoint, client_arrivals, detailed_run, replay_requests

DCAP = (0.075, 0.31, 20.0)  # sim_defercap.py's fit on all shapes (gpow exp, prompt_defer, prompt_defer_max ms)
RECORD_RUNS = ("h200-servetune-30s/t0_default_r10", "h200-servetune/t0_default_r12",
               "h200-servetune-30s/t2_max_num_batched_tokens16384_max_num_seqs128_r8")
BENCH_RUNS = ("qwen3-8b-vbench/default_r6", "qwen3-8b-vbench/default_r9", "qwen3-8b-vbench/default_r12",
              "qwen3-14b-np400/default_r6", "qwen3-32b/default_r2.5")


def med(a: np.ndarray) -> float:
    return float(np.median(a)) if len(a) else float("nan")


def show(name: str, tl: Timeline) -> None:
    allt = np.sort(np.concatenate([t for _, _, t in tl]))
    cut = np.where(np.diff(allt) > GAP_S)[0]
    ends = np.concatenate([allt[cut], allt[-1:]])
    dur = np.diff(ends) * 1e3  # dur[j]: the interval ending at ends[j + 1]
    firsts = np.array([f for _, f, _ in tl])
    lasts = np.array([t[-1] for _, _, t in tl])
    cnt = np.bincount(np.searchsorted(ends, firsts - GAP_S), minlength=len(ends) + 2)
    at_end, at_next = cnt[1:len(dur) + 1], cnt[2:len(dur) + 2]
    p99 = float(np.percentile(dur, 99))
    top = np.where(dur >= p99)[0]
    running = [int(((firsts < ends[j]) & (lasts > ends[j])).sum()) for j in top]
    print(f"{name:48s} intervals>=P99 {p99:6.1f} ms: n={len(top):2d} median {np.median(dur[top]):6.1f} max "
          f"{dur[top].max():6.1f}, k_end {np.bincount(at_end[top], minlength=5)[:5].tolist()} k_next "
          f"{np.bincount(at_next[top], minlength=5)[:5].tolist()}, running {np.median(running):.0f}; "
          f"decode-only median {np.median(dur[(at_end == 0) & (at_next == 0)]):5.1f}")
    for k in range(1, 5):
        nxt = np.where((at_next == k) & (at_end == 0))[0]
        own = at_end == k
        if not len(nxt) and not own.any():
            continue
        pair = dur[nxt] + dur[np.minimum(nxt + 1, len(dur) - 1)]
        print(f"    k={k}: k-next n={len(nxt):4d} median {med(dur[nxt]):6.1f} p90 "
              f"{(float(np.percentile(dur[nxt], 90)) if len(nxt) else float('nan')):6.1f} | k-end n={int(own.sum()):4d} "
              f"median {med(dur[own]):6.1f} | k-next + next {med(pair):6.1f} ms")


def sim(point: RefPoint, reqs: list[Request], cal: Calibration) -> Timeline:
    eng = SimulatedEngine(flavour="vllm", gpu="H200", shape=point.shape, args=point.args,
                          max_model_len=point.max_model_len, calibration=cal)
    return from_records(eng.run(reqs))


def main() -> None:
    by_name = {p.name: p for p in ALL_POINTS}
    for name in RECORD_RUNS:
        assert name in RECORDS, name
        reqs, recs = replay_requests(name)
        p = by_name[name]
        show(f"{name[-48:]} real", from_records(recs))
        show("  sim committed", sim(p, reqs, FITTED))
        show("  sim dcap", sim(p, reqs, cal_for(DCAP, p.shape)))
    for p in ALL_POINTS:
        if p.name not in BENCH_RUNS:
            continue
        run = detailed_run(p)
        assert run is not None and run.start_times is not None, p.name
        reqs = bench_requests(run, client_arrivals(p))
        show(f"{p.name} real", from_run(run))
        show("  sim committed", sim(p, reqs, FITTED))
        show("  sim dcap", sim(p, reqs, cal_for(DCAP, p.shape)))


if __name__ == "__main__":
    main()
