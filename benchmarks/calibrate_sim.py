"""Fit the simulator's efficiency factors and overheads to real measurements.

Minimises the mean absolute log error, capped per figure (robust: one queueing-sensitive P99 does
not dominate), of the seven `vllm bench serve` figures (output tok/s, P50/P99 TTFT, P50/P99 TPOT,
P50/P99 ITL) over the FIT_SET points of tuner/sim/reference.py, plus the TTFT and ITL quantiles
(P10..P99) of the per-request replays (REPLAYS: the simulator fed the measured send times and lengths
of servetune's H200 per-request records of the fit points), plus the five figures of the load points of the
dynamic-mix study FIT_STUDY (prompts of 300-6,000+ tokens: the only fit data where prefill attention costs
enough to fix e_attn; each point re-run as the study ran it), by coordinate search in log space (no extra dependency). Prints the fitted Calibration; `--write` rewrites
tuner/sim/calibration.py with it. Held-out error: benchmarks/sim_fidelity.py.

    .venv/bin/python benchmarks/calibrate_sim.py [--write] [--rounds 40]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from collections.abc import Callable
from multiprocessing import Pool
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tuner.sim.calibration import FITTED
from tuner.sim.cost import Calibration
from tuner.sim.reference import (
    ALL_POINTS,
    FIGURES,
    FIT_SET,
    FIT_STUDY,
    METRICS,
    REPLAYS,
    measured,
    replay,
    simulate,
    simulate_study_point,
    study_points,
)

FREE = ("e_lin", "e_w", "e_attn", "e_kv", "o_step_s", "o_tok_s", "launch_per_layer_s", "eager_mult", "frontend_s",
        "ingress_per_seq_s", "heat_slowdown", "heat_tau_s", "prompt_defer", "prompt_lead_max_s")
BOUNDS = {
    "ingress_per_seq_s": (1e-6, 5e-3), "heat_slowdown": (1e-3, 3.0), "heat_tau_s": (0.05, 30.0),
    "e_lin": (0.2, 1.0), "e_w": (0.3, 1.0), "e_attn": (0.1, 1.0), "e_kv": (0.2, 1.0),
    "o_step_s": (1e-5, 0.02), "o_tok_s": (1e-9, 1e-5), "launch_per_layer_s": (1e-7, 5e-4),
    "eager_mult": (1.0, 2.0), "frontend_s": (1e-4, 0.05), "prompt_defer": (0.01, 0.9),
    "prompt_lead_max_s": (0.005, 0.5),  # 0 (off) is set with --start prompt_lead_max_s=0, not searched
    "sched_ahead": (0, 1),  # on/off (--start sched_ahead=1), not searched
    # measured on the H200 (benchmarks/ttft_breakdown.py), set with --start, searchable
    "ingress_s": (1e-4, 0.02), "ingress_tok_s": (1e-8, 2e-5), "admit_cpu_s": (1e-4, 0.03),
    "admit_step_s": (1e-4, 0.03), "ingress_rho_max": (0.1, 0.98),
    "stream_tok_s": (1e-6, 3e-4),
    "stream_chunk_s": (1e-6, 3e-4),
    "w_floor_layer_s": (1e-6, 2e-4),  # fitted on five shapes (sim_shape_gpu.py, sim_joint_fit.py)
}
FIT_STUDY_POINTS = tuple(study_points(*FIT_STUDY))
CAP = 0.25  # per-figure cap on |log error|: a threshold effect (queueing onset) must not steer the fit
CAL_FILE = Path(__file__).resolve().parents[1] / "tuner" / "sim" / "calibration.py"


def _terms(job: tuple[Calibration, str]) -> list[float]:
    """Capped |log error| of every figure of one fit point or one replay (one unit of parallel work)."""
    cal, what = job
    if what.startswith("study:"):
        sp = FIT_STUDY_POINTS[int(what.removeprefix("study:"))]
        sim, real = simulate_study_point(sp, cal), dict(sp.real)
        pairs = [(sim[f], real[f]) for f in FIGURES]
    elif what.startswith("replay:"):
        sim_d, real_d = replay(what.removeprefix("replay:"), cal)
        pairs = [(s_q, r_q) for key in sim_d for s_q, r_q in zip(sim_d[key], real_d[key], strict=True)]
    else:
        p = next(q for q in ALL_POINTS if q.name == what)
        sim, real = simulate(p, cal), measured(p)
        pairs = [(sim[m], real[m]) for m in METRICS]
    return [min(abs(math.log(s / r)), CAP) if s > 0 else math.inf for s, r in pairs]


POOL: Pool | None = None  # --jobs > 1: points and replays of one loss run in parallel


def loss(cal: Calibration) -> float:
    jobs = ([(cal, p.name) for p in ALL_POINTS if p.name in FIT_SET] + [(cal, f"replay:{r}") for r in REPLAYS]
            + [(cal, f"study:{i}") for i in range(len(FIT_STUDY_POINTS))])
    terms = [t for ts in (POOL.map(_terms, jobs) if POOL else map(_terms, jobs)) for t in ts]
    return sum(terms) / len(terms)


def fit(start: Calibration, rounds: int, step: float, free: tuple[str, ...] = FREE,
        log: Path | None = None) -> tuple[Calibration, float]:
    # multiplicative steps cannot leave 0: seed factors that are off
    best = dataclasses.replace(start, o_tok_s=start.o_tok_s or 1e-8,
                               ingress_per_seq_s=start.ingress_per_seq_s or 4e-4)
    return coordinate_search(best, rounds, step, free, loss_fn=loss, log=log)


def coordinate_search(best: Calibration, rounds: int, step: float, free: tuple[str, ...],
                      loss_fn: Callable[[Calibration], float], log: Path | None = None,
                      label: str = "") -> tuple[Calibration, float]:
    """Each round, each factor in `free` x or / `step` (within BOUNDS), kept when `loss_fn` drops; a round without a
    gain takes the square root of the step, and the search ends below 1.005 (also used by sim_joint_fit.py)."""
    best_loss = loss_fn(best)
    for r in range(rounds):
        improved = False
        for name in free:
            lo, hi = BOUNDS[name]
            for f in (step, 1 / step):
                value = min(max(getattr(best, name) * f, lo), hi)
                cand = dataclasses.replace(best, **{name: value})
                cand_loss = loss_fn(cand)
                if cand_loss < best_loss - 1e-9:
                    best, best_loss, improved = cand, cand_loss, True
                    break
        print(f"{label + ' ' if label else ''}round {r}: step x{step:.3f} loss {best_loss:.5f}", flush=True)
        if log is not None:  # a long fit can be stopped and its best so far kept
            log.write_text(render(best))
        if not improved:
            step = math.sqrt(step)
            if step < 1.005:
                break
    return best, best_loss


def render(cal: Calibration) -> str:
    body = "\n".join(f"    {k}={v:.6g}," for k, v in cal.as_dict().items())
    return (
        '"""Fitted efficiency factors and overheads (written by benchmarks/calibrate_sim.py; edit by re-fitting).\n\n'
        "Fitted on real vLLM 0.26.0 runs on one H200 (benchmarks/reference/h200-vllm-0.26.0 and servetune's\n"
        "own H200 studies, benchmarks/reference/h200-servetune*: the points named in FIT_SET of\n"
        "tuner/sim/reference.py); other GPUs reuse these factors (see docs/sim.md).\n"
        '"""\n\nfrom __future__ import annotations\n\nfrom tuner.sim.cost import Calibration\n\n'
        f"FITTED = Calibration(\n{body}\n)\n"
    )


def main() -> None:
    global POOL, CAP  # the pool's forked workers read them
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite tuner/sim/calibration.py")
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--step", type=float, default=1.5, help="first multiplicative step of the search")
    ap.add_argument("--free", default=",".join(FREE), help="comma-separated factors to fit (the rest stay)")
    ap.add_argument("--log", type=Path, help="write the best calibration so far here after every round")
    ap.add_argument("--jobs", type=int, default=1, help="processes evaluating points in parallel")
    ap.add_argument("--cap", type=float, default=CAP, help="per-figure cap on |log error|")
    ap.add_argument("--start", default="", help="start values instead of the current fit, e.g. e_lin=0.8,e_kv=0.5")
    a = ap.parse_args()
    CAP = a.cap
    if a.jobs > 1:
        POOL = Pool(a.jobs)
    free = tuple(a.free.split(","))
    if unknown := [f for f in free if f not in BOUNDS]:
        sys.exit(f"--free: unknown factor(s) {unknown}; choose from {', '.join(FREE)}")
    t0 = time.process_time()
    start = FITTED
    for item in filter(None, a.start.split(",")):
        key, _, value = item.partition("=")
        if key not in BOUNDS:
            sys.exit(f"--start: unknown factor {key!r}; choose from {', '.join(FREE)}")
        start = dataclasses.replace(start, **{key: float(value)})
    start_loss = loss(start)
    cal, fitted_loss = fit(start, a.rounds, a.step, free, a.log)
    print(render(cal))
    print(f"fit points={len(FIT_SET)} loss_before={start_loss:.5f} loss_after={fitted_loss:.5f} "
          f"cpu_s={time.process_time() - t0:.1f}")
    if a.write:
        CAL_FILE.write_text(render(cal))
        print(f"wrote {CAL_FILE}")


if __name__ == "__main__":
    main()
