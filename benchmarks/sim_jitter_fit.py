"""The prompt step's CPU time as a random floor, with a faster prefill and a slower clock under load: chosen
leave-one-shape-out (issue 17).

Why, from the per-request timelines (`benchmarks/results/sim/prompt_steps_five_shapes.txt`): around an isolated
2048-token prompt the real engine holds the other streams for ~22-40 ms on every shape before the interval that
brings the first token (1.7B 22-26, 4B 17-40, 8B 25-34, 14B 26-28, 32B 21-32), which on 8B-32B the GPU prefill
covers and on 1.7B and 4B it does not; the isolated probe (ttft_breakdown.py) puts the engine's prefill ~20 %
faster than the committed fit, which had folded that CPU time into a slow prefill; and the load points need the
prefill slower again at sustained load (the clock under the power limit, `heat_slowdown`). Each of these alone was
tried and rejected (docs/sim.md); what none had is the spread: on an idle Qwen3-1.7B a 2048-token prompt's engine
time is 16-18 or 27-31 ms run to run, where the simulator gives every prompt step one length, so its P99 ITL jumps
between one mode and the next while the real one moves smoothly (the small shapes' real P99 TTFT / P50 TTFT is
1.5-2.1, the simulator's 1.3-1.9).

Form: `prompt_cpu_step_s` F (a step that carries new prompt tokens lasts at least the same step without them + F)
drawn per step from a gamma distribution of coefficient of variation cv (`prompt_cpu_step_cv`, seeded per run),
e_lin and e_attn x k, `heat_slowdown` h, and the share of the prompt's extra time given to the next step
(`prompt_defer`) d. Grid over (k, h, F, cv, d); each held-out shape's key minimises the mean loss of Qwen3-8B
(calibrate_sim's) and the three other shapes (sim_shape_cpu's), each shape on its own leave-one-shape-out weight
terms; the args, rate and client splits get the key chosen on all five.

Rule fixed before the run (commit before its output): adopt only if
  1. the shape split's P99 TTFT median drops by >= 3 points and its P99 ITL median is not worse;
  2. the shape split's P50 and P99 TPOT and tok/s medians are <= 5 % or not worse by more than 0.5;
  3. the args split's P99 TTFT and P99 ITL and the rate split's P99 TTFT are <= 10 % or not worse by more than 1,
     and the args split's P50 and P99 TPOT <= 5 % or not worse by more than 0.5;
  4. the SLA verdicts agree as often as committed;
  5. with the other draws (`jitter_seed` 1 and 2, same keys) the shape split's P99 TTFT median is still >= 3
     points below the committed one (a choice that holds on one draw only is noise).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/sim_jitter_fit.py [--jobs 2]

Second form, `--v2` (output `sim_jitter_fit_v2.txt`). The first run (`sim_jitter_fit.txt`) met the rule on P99 TTFT
(21.0 -> 12.8; 15.5 / 15.7 on the other draws), P99 ITL, tok/s, the args and rate splits, and failed it on the shape
split's P50 TPOT (4.7 -> 5.3, 1.7B and 4B held out) and one SLA verdict (FP8 `h200-fp8-static-conc` t1 @64, sim
meets). Both come from terms fitted on the committed base and kept: the weight-read floor per layer
(`w_floor_layer_s`, chosen on that base by sim_shape_gpu.py, it sets the small shapes' decode steps) and the FP8
gains (calibrate_fp8.py, fitted on it). So `--v2` adds the floor per layer to the grid (40 / 50 / 60 us, chosen
leave-one-shape-out with the rest; each shape's e_w stays its own) on a grid narrowed to the first run's picks'
neighbourhood, and re-chooses `fp8_lin_gain` and `fp8_w_gain` on the all-shape key's base by calibrate_fp8.py's
objective and fit points (attention and KV gains kept) before the SLA verdicts. Same rule, 1-5, fixed before the run.

Third form, `--v3` (output `sim_jitter_fit_v3.txt`). The second run made TPOT worse (7.0 / 7.4: the folds pick a 40 us
floor per layer), so the floor per layer stays each shape's own again. What the first run's floor cannot give is the
async-scheduling overlap: the engine core prepares a step with new prompts while the GPU runs the step before, so
that CPU time shows less behind a long step (32B: none) than a short one (1.7B: ~18 ms on top of its ~10 ms GPU
prefill), the form `admit_step_s` A has (tuner/sim/vllm_sched.py `_admit_late`), now drawn with the same spread as the
floor. Grid: A 0 / 12 / 16 / 20 ms x floor F 0 / 15 / 22 ms x cv 0.5 / 1 x k 1.1 / 1.2 x heat 0.15 / 0.3 x defer 0.15
/ 0.31, plus the committed key; FP8 gains re-chosen as in `--v2`. Same rule, 1-5, fixed before the run.

Fourth form, `--v3 --refit` (output `sim_jitter_fit_v4.txt`). The third run met the rule on the shape split (P99 TTFT
8.6, P99 ITL 15.2, TPOT 5.0 / 4.6) and failed it on the args split (P99 ITL 10.4, TPOT50 6.3: Qwen3-8B configs never
fitted on) and one FP8 verdict: the key changes how a step's time is made up, and the Qwen3-8B step terms fitted with
the old make-up were kept. So here every fold's four best keys (and the all-shape fit's) get those terms refitted on
Qwen3-8B's loss alone (calibrate_sim.py's coordinate search, 4 rounds, step 1.15: REFIT below), the refitted terms
apply to every shape, and each fold picks among its candidates again by the refitted losses. Qwen3-8B is never held
out, so the shape folds stay honest. Same rule, 1-5, fixed before the run.

The fourth run held the heat term's clock through each closed-form decode run, which broke the simulator's rule that
its fast path gives the step-by-step records (tests/sim/test_run.py); with decode runs stepped at the moving clock
(tuner/sim/core.py `_decode_run_clocked`) the same command (output `sim_jitter_fit_v4_exact.txt`) gives shape P99 TTFT
13.7, P99 ITL 19.2, TPOT 5.2 / 4.3, args 6.8 / 3.0, and fails rule 4 on the FP8 closed-loop point t1 @64 (real P99
TTFT 2069 ms, 3.4 % over the 2 s limit; simulated 1961). Its FP8 gains were re-chosen on a reduced grid (lin x w);
calibrate_fp8.py's own grid re-chooses all four.

Fifth form, `--v3 --refit --fp8-full` (output `sim_jitter_fit_v5.txt`): the fourth with all four FP8 gains re-chosen on
calibrate_fp8.py's full grid (LIN x ATTN x KV x W there) by its objective and fit points. Same rule, 1-5, fixed before
the run; if it fails, nothing is adopted.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import sys
import time
from multiprocessing import Pool
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.calibrate_sim import loss
from benchmarks.sim_fidelity import medians
from benchmarks.sim_shape_cpu import FIT8, SHAPES, errs, loso_pick, print_draws, shape_loss, shape_points, sla
from tuner.sim.calibration import FITTED, SHAPE_LOSO
from tuner.sim.cost import Calibration
from tuner.sim.reference import ALL_POINTS, split_of

# what every form here starts from: the calibration before the fourth run's key was adopted (7eeb439's FITTED), so the
# script reruns the same way after the adoption
BASE = dataclasses.replace(FITTED, e_lin=0.6, e_attn=0.53619, o_step_s=0.000579708, ingress_per_seq_s=8.09713e-05,
                           heat_slowdown=0.0, prompt_defer=0.312477, prompt_cpu_step_s=0.0, prompt_cpu_step_cv=0.0,
                           fp8_lin_gain=1.55, fp8_w_gain=1.1)


def base_for(shape: str) -> Calibration:
    """BASE with the shape's own leave-one-shape-out weight terms (tuner.sim.reference.shape_calibration's)."""
    terms = SHAPE_LOSO[shape]
    return dataclasses.replace(BASE, e_w=terms["e_w"], w_floor_layer_s=terms["w_floor_layer_s"])


Key = tuple[float, ...]  # (k, heat, F ms, cv, defer[, weight floor us per layer (0: the shape's own)[, A ms]])
KS = (1.0, 1.1, 1.2, 1.25)
HEATS = (0.0, 0.15, 0.3)
F_MS = (0.0, 15.0, 22.0, 30.0)
CVS = (0.0, 0.5, 1.0)
DEFERS = (0.15, BASE.prompt_defer)
V2 = {"k": (1.1, 1.2, 1.25), "heat": (0.15, 0.3), "f": (15.0, 22.0), "cv": (0.5, 1.0), "defer": (0.15,),
      "wfloor": (40.0, 50.0, 60.0)}
V3 = {"k": (1.1, 1.2), "heat": (0.15, 0.3), "f": (0.0, 15.0, 22.0), "cv": (0.5, 1.0), "defer": (0.15, BASE.prompt_defer),
      "wfloor": (0.0,), "admit": (0.0, 12.0, 16.0, 20.0)}
REFIT = ("e_kv", "o_step_s", "o_tok_s", "frontend_s", "ingress_per_seq_s", "prompt_lead_max_s")  # --refit: 8B's own
TOP = 4  # --refit: candidates per fold
FP8_LIN = (1.4, 1.5, 1.55, 1.6, 1.7, 1.8)  # --v2: fp8_lin_gain, fp8_w_gain re-chosen on the new base
FP8_W = (0.9, 1.0, 1.1, 1.2, 1.3, 1.45, 1.6)


def with_key(cal: Calibration, key: Key, seed: int = 0) -> Calibration:
    k, heat, f_ms, cv, defer = key[:5]
    out = dataclasses.replace(cal, e_lin=cal.e_lin * k, e_attn=cal.e_attn * k, heat_slowdown=heat,
                              prompt_cpu_step_s=f_ms * 1e-3, prompt_cpu_step_cv=cv, prompt_defer=defer,
                              jitter_seed=seed)
    if len(key) > 5 and key[5]:
        out = dataclasses.replace(out, w_floor_layer_s=key[5] * 1e-6)
    return dataclasses.replace(out, admit_step_s=key[6] * 1e-3) if len(key) > 6 else out


def losses_of(key: Key) -> tuple[Key, dict[str, float]]:
    return key, {FIT8: loss(with_key(BASE, key)),
                 **{s: shape_loss(with_key(base_for(s), key), s) for s in SHAPES}}


def grid(form: str = "v1") -> list[Key]:
    if form == "v2":
        return [*itertools.product(*V2.values()), (1.0, 0.0, 0.0, 0.0, BASE.prompt_defer, 50.0)]  # + committed
    if form == "v3":  # a key with neither floor nor admission has no fixed CPU time to spread: cv drawn only once
        keys = [key for key in itertools.product(*V3.values()) if key[2] or key[6] or key[3] == V3["cv"][0]]
        return [*keys, (1.0, 0.0, 0.0, 0.0, BASE.prompt_defer, 0.0, 0.0)]  # + committed
    keys: list[Key] = [(k, h, f, cv, d) for k, h, f, cv, d in itertools.product(KS, HEATS, F_MS, CVS, DEFERS)
                       if f or not cv]  # no floor: its spread means nothing
    return keys


def refit_of(key: Key) -> tuple[Key, dict[str, float]]:
    """The REFIT terms refitted on Qwen3-8B's loss with the key's terms in place."""
    from benchmarks.calibrate_sim import fit
    cal, _ = fit(with_key(BASE, key), rounds=4, step=1.15, free=REFIT)
    return key, {name: getattr(cal, name) for name in REFIT}


def refitted_losses(job: tuple[Key, dict[str, float]]) -> dict[str, float]:
    key, terms = job
    return {FIT8: loss(dataclasses.replace(with_key(BASE, key), **terms)),  # type: ignore[arg-type]
            **{s: shape_loss(dataclasses.replace(with_key(base_for(s), key), **terms), s)  # type: ignore[arg-type]
               for s in SHAPES}}


def _fp8_job(job: tuple[Calibration, int]) -> dict[str, float]:
    from benchmarks.calibrate_fp8 import FIT_POINTS, errors
    return errors(FIT_POINTS[job[1]], job[0])


def fp8_refit(base: Calibration, jobs: int, full: bool = False) -> Calibration:
    """`base` with fp8_lin_gain and fp8_w_gain (`full`: all four gains, on calibrate_fp8.py's grid) chosen by
    calibrate_fp8.py's objective and fit points."""
    from benchmarks.calibrate_fp8 import ATTN, FIT_POINTS, KV, LIN, W, score
    if full:
        cands = [dataclasses.replace(base, fp8_lin_gain=lin, fp8_attn_gain=at, fp8_kv_gain=kv, fp8_w_gain=w)
                 for lin, at, kv, w in itertools.product(LIN, ATTN, KV, W)]
    else:
        cands = [dataclasses.replace(base, fp8_lin_gain=lin, fp8_w_gain=w) for lin in FP8_LIN for w in FP8_W]
    cands.append(base)
    n = len(FIT_POINTS)
    with Pool(jobs) as pool:
        rows = pool.map(_fp8_job, [(c, i) for c in cands for i in range(n)], chunksize=4)
    scores = [score(rows[j * n:(j + 1) * n]) for j in range(len(cands))]
    best = min(range(len(cands)), key=scores.__getitem__)
    b = cands[best]
    print(f"fp8 gains on the new base: lin {b.fp8_lin_gain:g} attn {b.fp8_attn_gain:g} kv {b.fp8_kv_gain:g} w "
          f"{b.fp8_w_gain:g}, objective {scores[best]:.2f}% (kept gains lin {base.fp8_lin_gain:g} attn "
          f"{base.fp8_attn_gain:g} kv {base.fp8_kv_gain:g} w {base.fp8_w_gain:g}: {scores[-1]:.2f}%)")
    return cands[best]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--v2", action="store_true", help="the second form (docstring): weight floor in the grid, FP8 "
                    "gains re-chosen on the new base")
    ap.add_argument("--refit", action="store_true", help="the fourth form (docstring): the Qwen3-8B step terms "
                    "refitted for each fold's best keys")
    ap.add_argument("--fp8-full", action="store_true", help="the fifth form (docstring): all four FP8 gains "
                    "re-chosen on calibrate_fp8.py's grid")
    ap.add_argument("--v3", action="store_true", help="the third form (docstring): the engine's admission CPU per "
                    "step, drawn with the same spread, beside the floor; FP8 gains re-chosen on the new base")
    a = ap.parse_args()
    t0 = time.time()
    form = "v3" if a.v3 else "v2" if a.v2 else "v1"
    keys = grid(form)
    losses: dict[Key, dict[str, float]] = {}
    print(f"{'k':>5s} {'heat':>5s} {'F ms':>5s} {'cv':>4s} {'defer':>6s} {'wfl':>4s} {'A ms':>4s} {FIT8:>9s} "
          + " ".join(f"{s:>10s}" for s in SHAPES), flush=True)
    with Pool(a.jobs) as pool:
        for key, row in pool.imap(losses_of, keys):
            losses[key] = row
            wfl = f"{key[5]:4.0f}" if len(key) > 5 else "   -"
            adm = f"{key[6]:4.0f}" if len(key) > 6 else "   -"
            print(f"{key[0]:5.2f} {key[1]:5.2f} {key[2]:5.1f} {key[3]:4.1f} {key[4]:6.3f} {wfl} {adm} {row[FIT8]:9.5f} "
                  + " ".join(f"{row[s]:10.5f}" for s in SHAPES), flush=True)
    chosen = loso_pick(keys, losses)
    terms: dict[Key, dict[str, float]] = {}
    if a.refit:
        cands: list[Key] = []
        for fold in (*SHAPES, "all"):
            on = (FIT8, *(o for o in SHAPES if o != fold))
            ranked = sorted(keys, key=lambda g: sum(losses[g][x] for x in on) / len(on))
            cands += [g for g in ranked[:TOP] if g not in cands]
        with Pool(a.jobs) as pool:
            terms = dict(pool.map(refit_of, cands))
            refitted = dict(zip(cands, pool.map(refitted_losses, list(terms.items())), strict=True))
        for g in cands:
            print(f"refitted {g}: " + " ".join(f"{n}={v:.4g}" for n, v in terms[g].items()) + " | "
                  + " ".join(f"{x}={refitted[g][x]:.5f}" for x in (FIT8, *SHAPES)), flush=True)
        chosen = loso_pick(cands, refitted)
        losses = {**losses, **refitted}

    def cal_of(base: Calibration, key: Key, seed: int = 0) -> Calibration:
        return dataclasses.replace(with_key(base, key, seed), **terms.get(key, {}))  # type: ignore[arg-type]
    committed = [r for s in SHAPES for r in errs(base_for(s), shape_points(s))]
    print_draws(lambda s, seed: cal_of(base_for(s), chosen[s], seed), chosen,
                "k, heat, F ms, cv, defer[, wfloor us, A ms]", "jitter floor LOSO")
    print(f"split=shape points={len(committed)} committed: {medians(committed)}")
    print(f"all five shapes: key {chosen['all']}; 8B loss {losses[chosen['all']][FIT8]:.5f} "
          f"(committed {loss(BASE):.5f})")
    everywhere = cal_of(BASE, chosen["all"])
    if form != "v1":
        everywhere = fp8_refit(everywhere, a.jobs, a.fp8_full)
    for split in ("args", "rate", "client"):
        pts = [p for p in ALL_POINTS if split_of(p) == split]
        print(f"split={split} points={len(pts)} committed: {medians(errs(BASE, pts))}")
        print(f"split={split} points={len(pts)} all-shape fit: {medians(errs(everywhere, pts))}")
    print(f"sla (LOSO per shape, all-shape fit elsewhere): {sla({**{s: cal_of(base_for(s), chosen[s]) for s in SHAPES}, 'all': everywhere})}")
    if terms:
        print(f"all-shape calibration: {everywhere}")
    print(f"wall_s={time.time() - t0:.0f}")


if __name__ == "__main__":
    main()
