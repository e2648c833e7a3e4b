"""Leave-one-shape-out check of a cap on the deferred part of a prompt step, with gpow (issue 17's P99 ITL).

Why: at high load the sim's P99 ITL is too low on every shape (Qwen3-8B vllm bench 9 / 12 req/s -20.7 / -27.3 %).
The per-request data (benchmarks/prompt_tail.py) say why: on Qwen3-8B a step that takes k new prompts holds all of
their work before the first tokens' interval (k = 3: 130-160 ms, the next interval near the decode step), while the
committed `prompt_lead_max_s` (55.9 ms) cuts that interval and moves the rest into the next one (two intervals of
~75 and ~150 ms), so the longest interval is too short. The candidate ("dcap"): no lead cap; the deferred part is
`prompt_defer` x the extra time but at most `prompt_defer_max_s` (a fixed output-side delay), on top of gpow's
per-GEMM efficiency (benchmarks/sim_loso.py). Grid: gpow exp x share x cap. The same protocol as sim_loso.py: each
key's losses (calibrate_sim.py's 8B loss; each 14B / 32B shape's seven `vllm bench` figures), a held-out shape's
errors from the key fitted on 8B + the other shape, the args and rate splits from each fit.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/sim_defercap.py [--lead]

--lead ("dcap+lead"): the committed share (0.31) and lead cap (55.9 ms) kept and the deferred part cut at 30-80 ms,
so only steps whose extra time is above ~85-135 ms (2-3+ prompts) change: they keep more of it before the first
tokens, as the 8B high-load data show, while two prompts at 8 req/s stay split as committed.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.sim_fidelity import medians
from benchmarks.sim_loso import SHAPES, gemm_factor, loso, loss8, shape_loss, split_errors
from tuner.sim.calibration import FITTED
from tuner.sim.cost import Calibration
from tuner.sim.reference import ALL_POINTS, RefPoint, errors_pct, measured, simulate, split_of

EXPS = (0.05, 0.075, 0.1)
SHARES = (0.2, 0.31, 0.45)
CAPS_MS = (5.0, 10.0, 15.0, 20.0, 30.0)
# --lead: the committed lead cap (55.9 ms) and share kept, prompt_defer_max only cuts what steps with 2+ prompts carry
LEAD_CAPS_MS = (30.0, 40.0, 50.0, 60.0, 80.0)
LEAD = "--lead" in sys.argv
Key = tuple[float, float, float]  # (gpow exp, prompt_defer, prompt_defer_max ms)


def cal_for(key: Key, shape: str) -> Calibration:
    exp, share, cap = key
    e_lin = min(FITTED.e_lin * gemm_factor("gpow", exp, shape), 1.0)
    lead = FITTED.prompt_lead_max_s if LEAD else 0.0
    return dataclasses.replace(FITTED, e_lin=e_lin, prompt_defer=share, prompt_lead_max_s=lead,
                               prompt_defer_max_s=cap / 1e3)


def errs(key: Key, pts: list) -> list[dict[str, float]]:
    return [errors_pct(simulate(p, cal_for(key, p.shape)), measured(p)) for p in pts]


def main() -> None:
    t0 = time.process_time()
    keys = ([(e, FITTED.prompt_defer, c) for e in EXPS for c in LEAD_CAPS_MS] if LEAD
            else [(e, s, c) for e in EXPS for s in SHARES for c in CAPS_MS])
    losses: dict[Key, dict[str, float]] = {}
    print(f"grid: gpow exp {EXPS}, prompt_defer_max ms {LEAD_CAPS_MS}, committed share and lead cap kept" if LEAD
          else f"grid: gpow exp {EXPS}, prompt_defer {SHARES}, prompt_defer_max ms {CAPS_MS}, prompt_lead_max off")
    print(f"{'exp':>5s} {'share':>5s} {'cap':>5s} {'8b':>8s} {'14b':>8s} {'32b':>8s}")
    for k in keys:
        row = {"qwen3-8b": loss8(cal_for(k, "qwen3-8b")), **{s: shape_loss(cal_for(k, s), s) for s in SHAPES}}
        losses[k] = row
        print(f"{k[0]:5.3f} {k[1]:5.2f} {k[2]:5.1f} {row['qwen3-8b']:8.5f} {row['qwen3-14b']:8.5f} "
              f"{row['qwen3-32b']:8.5f}", flush=True)
    print(f"committed: 8b loss {loss8(FITTED):.5f}")

    def best(fit: tuple[str, ...]) -> Key:
        return min(keys, key=lambda k: statistics.mean(losses[k][s] for s in fit))

    fits = {"all": best(("qwen3-8b", *SHAPES)), "qwen3-8b": best(("qwen3-8b",))}
    def itl(p: RefPoint, k: Key) -> str:
        return (f" | P99 ITL ms measured {measured(p)['p99_itl_ms']:.1f} "
                f"sim {simulate(p, cal_for(k, p.shape))['p99_itl_ms']:.1f}")

    held = loso(best, errs, lambda k: f"exp={k[0]} share={k[1]} cap={k[2]} ms", fits, itl)
    print(f"split=shape points={len(held)} form=dcap LOSO median_abs_error_pct: {medians(held)}")
    for split in ("args", "rate", "client"):
        pts = [p for p in ALL_POINTS if split_of(p) == split]
        print(f"split={split} points={len(pts)} committed: {medians(split_errors(None, pts))}")
        for name, k in fits.items():
            print(f"split={split} points={len(pts)} form=dcap fit={name} (exp={k[0]} share={k[1]} cap={k[2]} ms, "
                  f"8b loss {losses[k]['qwen3-8b']:.5f}): {medians(errs(k, pts))}")
    k = fits["all"]
    print("signed P99 ITL % (sim vs measured), committed vs dcap fit on all shapes, 8B points of split args/rate/client")
    for p in [p for p in ALL_POINTS if split_of(p) in ("args", "rate", "client")]:
        real = measured(p)["p99_itl_ms"]
        a, b = simulate(p, FITTED)["p99_itl_ms"], simulate(p, cal_for(k, p.shape))["p99_itl_ms"]
        print(f"  {split_of(p):6s} {p.name[-40:]:40s} measured {real:6.1f} committed {(a / real - 1) * 100:+6.1f} "
              f"dcap {(b / real - 1) * 100:+6.1f}")
    print(f"cpu_s={time.process_time() - t0:.0f}")


if __name__ == "__main__":
    main()
