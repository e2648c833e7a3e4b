"""The prompt step's launch holds the step before it: chosen leave-one-shape-out on the shipped calibration (issue 17).

Why, from the 4B step trace (benchmarks/results/h100/step-trace-4b/, docs/sim.md "The 4B step trace"): the client's
ITL tail is the engine's step intervals; the longest are steps that carry new prompts, whole, and the step just before
one (24-38 ms against 15.6 for a decode step on that host); the prompts' first tokens leave with the prompt step's own
output (99.3-100 %). With async scheduling the engine core launches step N+1 while the GPU runs step N and hands out
N's tokens only after that launch, which for a prompt step takes 19-35 ms of CPU (two traces: ~14 ms + ~0.58 ms per
layer), whatever its prompts. The shipped simulator instead lengthens the prompt step by a drawn CPU floor and gives a
share of it (`prompt_defer`) and the first tokens to the next step, which splits one long interval into two shorter
ones: its multi-prompt step intervals are 20-40 % short on 1.7B-8B (benchmarks/prompt_packing.py).

Form (`prompt_hold` 1, tuner/sim/vllm_sched.py `_held`): no deferral, no floor, the first tokens at the prompt step's
end; the step before a prompt step hands out at max(its GPU end, the launch's end); the launch starts with that step
or when the CPU is done with the launch before (one engine core); the GPU starts the prompt step `prompt_launch_serial`
into the launch and cannot end it before the launch ends. The launch is drawn per step (gamma, cv
`prompt_cpu_step_cv`) with mean `prompt_cpu_step_s` + layers x `prompt_cpu_layer_s`, v ms for 36 layers split as the
two traces give it (14.1 + 0.575 per layer at 34.8). Grid: v in {25, 30, 34.8, 40, 45} x cv {0.27, 0.45, 0.6} x
serial {0, 0.25, 0.5} x the API server's busy stretch `ingress_rho_max` {0, 0.8}. Each held-out shape's key minimises
the mean loss of Qwen3-8B (calibrate_sim's) and the three other shapes (sim_shape_cpu's), every shape on its own
leave-one-shape-out weight terms; the Qwen3-4B fold starts from its own SHAPE_LOSO terms (sim_lead_fit.base), the
others from FITTED; the args, rate and client splits get the key chosen on all five.

The form and grid were picked after an exploratory scan on the shipped calibration with the held-out splits printed
(benchmarks/sim_fidelity.py with the terms overridden); the choice below is made on the fit losses only.

Rule fixed before the run (commit before its output): adopt only if, against the shipped calibration,
  1. the shape split's P99 ITL median drops by >= 3 points and its P99 TTFT median is not worse by more than 0.5;
  2. the shape split's P50 and P99 TPOT and tok/s medians are <= 5 % or not worse by more than 0.5;
  3. the args split's P99 TTFT and P99 ITL and the rate split's P99 TTFT are <= 10 % or not worse by more than 1,
     and the args split's P50 and P99 TPOT <= 5 % or not worse by more than 0.5;
  4. the SLA verdicts agree as often as shipped;
  5. with the other draws (`jitter_seed` 1 and 2, same keys) the shape split's P99 ITL is still >= 3 points below
     shipped.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/sim_hold_fit.py [--jobs 2] [--refit [--ingress | --window]]
    # outputs results/sim/sim_hold_fit.txt, sim_hold_fit_refit.txt, sim_hold_fit_ingress.txt, sim_hold_fit_window.txt
    # (--refit --window), sim_hold_fit_measured.txt (--refit --window --measured), sim_hold_fit_peek.txt (+ --peek),
    # sim_hold_fit_peek_serial0.txt (+ --peek --serial 0)

First run: rejected by rule 2 (shape split P50 TPOT 5.2 -> 6.1; P99 ITL 19.2 -> 11.4, P99 TTFT 13.7 -> 11.9, rules 1
and 3-5 met). The Qwen3-8B step terms it kept (e_kv, o_step_s, o_tok_s, frontend_s, ingress_per_seq_s) were fitted with
the floor and the deferral in place, and the per-step overhead sets the small shapes' decode steps, where P50 TPOT
got worse (1.7B). Second form, `--refit` (output `sim_hold_fit_refit.txt`): every fold's TOP best keys get those
terms refitted on Qwen3-8B's loss alone (calibrate_sim.py's coordinate search, 4 rounds, step 1.15), from the fold's
own base (the 4B fold's terms for it), the refitted terms apply to every shape, and each fold picks among its
candidates by the refitted losses. Qwen3-8B is never held out, so the folds stay honest. Same rule, 1-5, fixed before
the run.

Second run (`sim_hold_fit_refit.txt`): rejected by rule 1 (shape split P99 TTFT 13.7 -> 14.5; P99 ITL 19.2 -> 12.1, P50
TPOT 5.7, rules 2-5 met). An earlier run of this form, before a launch-bound step was made to end its sampling after
its last launched kernel (o_step_s later; without it two steps could hand out at the same instant, which
tests/sim/test_run.py rejects), had met the rule; its records were wrong, so it does not count. What the small shapes
miss now is the first token's own time: at 2 req/s (an idle engine) the simulator's P50 TTFT is 24 ms short on 4B and
11 ms on 1.7B, as before the hold. Third form, `--refit --ingress` (output `sim_hold_fit_ingress.txt`): the API
server's own time per new request before the engine sees it (`ingress_s`, served one at a time: reading and
tokenising the prompt, setting the request up) in the grid, 0 / 5 / 10 ms, cv fixed at the trace's 0.27 (every fold
but one chose it), the rest as the second form. Same rule, 1-5, fixed before the run.

Third run: met rules 1-5 (shape P99 TTFT 13.7 -> 10.5, P99 ITL 19.2 -> 14.2, P50 / P99 TPOT 5.3 / 4.7; args P99 TTFT
/ ITL 4.2 / 6.7; SLA 67/67; other draws' P99 ITL 10.8 / 11.9): adopted (tuner/sim/calibration.py).

Fourth form, `--refit --window` (output `sim_hold_fit_window.txt`), on the third form's procedure (same start, grid
without the ingress column, same refit): two terms measured on the H200, not fitted. (a) The engine core schedules the
step after a prompt step once that step's launch is over (`sched_after_launch`), so a request that reaches it during
the launch joins the next step, not the one after: async scheduling overlaps the scheduling of step N+1 with step N's
GPU work, not with its launch, which is the same CPU. (b) The API server's time per new request is the isolated
probe's, 4.5 ms + 3 us per prompt token (`ingress_s`, `ingress_tok_s`; benchmarks/ttft_breakdown.py, the same on every
shape, docs/sim.md), in place of the fitted 5 ms (10 ms in the 4B fold). The form was picked after four what-ifs on the
shipped calibration with the held-out splits printed (benchmarks/sim_fidelity.py with (a), with (a) and ingress 10 ms,
with (a) and (b), with (a) and 6 us per token); the choice below is made on the fit losses only. Rule fixed before the
run (commit before its output): adopt only if, against the shipped calibration (the third form's, `HOLD` below; its
shape split at jitter_seed 0 / 1 / 2: P99 TTFT 10.5 / 10.2 / 10.7, P99 ITL 14.2 / 10.8 / 11.9),
  1. the shape split's P99 ITL median drops by >= 3 points and its P99 TTFT median is <= 10 % or not worse by more
     than 0.5;
  2. the shape split's P50 and P99 TPOT and tok/s medians are <= 5 % or not worse by more than 0.5;
  3. the args split's P99 TTFT and P99 ITL and the rate split's P99 TTFT are <= 10 % or not worse by more than 1,
     and the args split's P50 and P99 TPOT <= 5 % or not worse by more than 0.5;
  4. the SLA verdicts agree as often as shipped (67/67);
  5. with the other draws (`jitter_seed` 1 and 2, same keys) the shape split's P99 ITL is below shipped's same draw
     and its P99 TTFT not worse than shipped's same draw by more than 1.

Fourth run: rejected by rules 1 and 3 (shape P99 ITL 14.2 -> 12.6, a 1.6-point drop; args P99 ITL 6.7 -> 12.3; shape
P99 TTFT 9.5, TPOT50 5.3, SLA 67/67). Every fold's grid choice moved the launch to 40 ms (the loss's pick, not the
traces'). Fifth form, `--refit --window --measured` (output `sim_hold_fit_measured.txt`): the fourth with fewer free
terms: the launch fixed at the two traces' 14.1 ms + 0.575 ms per layer and cv 0.27, ingress_rho_max at the shipped
0.8 (every fold of the third run chose it), so the grid is the serial share alone (0 / 0.25 / 0.5); the same refit of
Qwen3-8B's step terms for each of those keys. Same rule, 1-5, fixed before the run.

Fifth run: rejected by rule 5 (the third draw's shape P99 TTFT 12.0 against shipped's 10.7, worse by 1.3). Rules 1-4
were met: shape P99 ITL 14.2 -> 9.1, P99 TTFT 10.4, P50 / P99 TPOT 5.0 / 4.9, tok/s 1.2; args P99 TTFT / ITL 4.3 / 7.0;
rate P99 TTFT 7.0; SLA 67/67; other draws' P99 ITL 10.3 / 10.1, P99 TTFT 11.1 / 12.0. The blind H100 runs measured
afterwards (benchmarks/sim_blind.py) do not favour it either: P99 TTFT 12.8 against shipped's 8.4 on the new sets.

Sixth form, `--refit --window --measured --peek` (output `sim_hold_fit_peek.txt`): the fifth with the hold also seeing
the requests that reach the engine core during a prompt step's launch (`sched_after_launch` 2, tuner/sim/vllm_sched.py
`_clock`). Why: the fifth form let such a request join the next step but decided whether that next step carries a
prompt (and so holds this step's tokens, the prompts' first tokens among them) when this step started, before the
request came. The engine core schedules step N+1 after launching step N and hands out N's tokens after launching N+1,
so a prompt's first token waits for the launch of a prompt that came in during its own launch. Seen in the second
instances' per-request data (the 1.7B and 4B shape points, both instances fed the same sends; /tmp analysis, disclosed
in docs/sim.md): a request followed by another within 0-40 ms has its TTFT raised by 30-46 ms on 4B and 16-32 ms on
1.7B at 2-8 req/s in both instances, and both first tokens leave within a few ms of each other; the fifth form raises
it by -3 to +7 ms. One what-if on the shipped calibration (no refit, `sched_after_launch` 2) was seen before this rule:
shape P99 TTFT / P99 ITL / P50 TPOT 10.4 / 9.4 / 5.1 at jitter seed 0, rate P99 TTFT 15.4. Same procedure and grid as
the fifth. Rule fixed before the run (commit before its output), against the shipped calibration (HOLD): 1-5 as the
fifth form's.

Sixth run: rejected by rule 2 (shape split P50 TPOT 5.3 -> 6.7: the 1.7B and 4B folds chose serial 0.25 and read 9.0
and 8.5). Rules 1 and 3-5 were met: shape P99 ITL 14.2 -> 10.6, P99 TTFT 9.4, P99 TPOT 4.9; args P99 TTFT / ITL 4.8 /
6.9, P50 / P99 TPOT 3.9 / 4.1; rate P99 TTFT 7.5; SLA 67/67; other draws' P99 ITL 10.6 / 9.4, P99 TTFT 7.3 / 9.2 (shipped's
10.8 / 11.9 and 10.2 / 10.7). Seventh form, `--refit --window --measured --peek --serial 0` (output
`sim_hold_fit_peek_serial0.txt`): the sixth with the serial share fixed at 0, as the traces have it (a prompt step's
kernels run as they are launched; the 1.7B fold's 0.25 read P99 TTFT 36.4 on its shape), so every fold has the one key
and nothing but Qwen3-8B's step terms is fitted. Chosen after the sixth run's output was seen (its per-fold rows, above).
Same rule, 1-5, fixed before the run (commit before its output).

Seventh run: met rules 1-5 (shape P99 TTFT 10.5 -> 9.2, P99 ITL 14.2 -> 9.5, P50 / P99 TPOT 4.9 / 4.9, tok/s 1.0; args
P99 TTFT / ITL 4.8 / 6.9, P50 / P99 TPOT 3.9 / 4.1; rate P99 TTFT 7.5; SLA 67/67; other draws' P99 ITL 10.0 / 8.7
below shipped's 10.8 / 11.9, P99 TTFT 8.2 / 9.2): adopted (tuner/sim/calibration.py). The per-request analysis the
sixth form came from is now a script, benchmarks/first_token_pairs.py (its bins differ slightly from the /tmp one's).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import statistics
import sys
import time
from multiprocessing import Pool
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import sim_shape_cpu
from benchmarks.calibrate_sim import loss
from benchmarks.sim_fidelity import medians
from benchmarks.sim_lead_fit import FOLD4B, TRACE_8B_MS, TRACE_FIXED_MS, TRACE_LAYER_MS
from benchmarks.sim_lead_fit import base as lead_base
from benchmarks.sim_shape_cpu import (
    FIT8,
    SHAPES,
    errs,
    print_draws,
    print_splits,
    shape_loss,
    shape_points,
    sla,
)
from tuner.sim.calibration import FITTED
from tuner.sim.cost import Calibration

# what the grid starts from: the calibration before the third run's key was adopted (1bebba9's FITTED and SHAPE_LOSO),
# so the script reruns the same way after the adoption
BEFORE = dataclasses.replace(FITTED, e_kv=0.8, o_step_s=0.000438343, o_tok_s=8.26928e-09, frontend_s=0.0001,
                             ingress_per_seq_s=9.98569e-05, ingress_s=0.0, ingress_rho_max=0.0, prompt_defer=0.15,
                             prompt_cpu_step_s=0.015, prompt_cpu_step_cv=1.0, prompt_cpu_layer_s=0.0, prompt_hold=0,
                             ingress_tok_s=0.0, sched_after_launch=0)
BEFORE_4B = {"prompt_defer": 0.312477, "e_kv": 0.857904, "o_step_s": 0.00047007, "frontend_s": 0.000107238,
             "ingress_per_seq_s": 8.09713e-05, "prompt_lead_max_s": 0.0559017}  # the 4B fold's own terms then


# what shipped after the third run (its FITTED and the 4B fold's SHAPE_LOSO terms), frozen: the fourth to seventh forms
# are judged against it (the seventh's adoption moved FITTED's e_kv and API-server terms; HOLD keeps the old ones)
HOLD = dataclasses.replace(FITTED, e_kv=0.8, o_step_s=0.000381168, o_tok_s=9.50967e-09, frontend_s=0.000152087,
                           ingress_per_seq_s=8.68321e-05, ingress_s=0.005, ingress_tok_s=0.0, ingress_rho_max=0.8,
                           prompt_defer=0.0, prompt_cpu_step_s=0.0141, prompt_cpu_step_cv=0.27,
                           prompt_cpu_layer_s=0.000575, prompt_launch_serial=0.0, prompt_hold=1, sched_after_launch=0)
HOLD_4B = {"e_kv": 0.857904, "o_step_s": 0.000408757, "o_tok_s": 6.25276e-09, "frontend_s": 0.0001,
           "ingress_per_seq_s": 7.04098e-05, "prompt_launch_serial": 0.5, "ingress_s": 0.01}
INGRESS_PROBE = (4.5, 3.0)  # --window: the isolated probe's API-server time per request, ms + us per prompt token


def base(fold: str | None, shape: str | None) -> Calibration:
    """The calibration a key is applied to: BEFORE, or the 4B fold's own terms then, with `shape`'s weight terms (the
    weight terms are unchanged by the adoption)."""
    return lead_base(fold, shape, BEFORE, BEFORE_4B)


def shipped(shape: str, window: bool = False, seed: int = 0) -> Calibration:
    """What shipped before the adoption for a shape-split point (tuner.sim.reference.shape_calibration then); with
    `window`, before the fourth form's."""
    if window:
        return dataclasses.replace(lead_base(shape, shape, HOLD, HOLD_4B), jitter_seed=seed)
    return base(shape, shape)


Key = tuple[float, ...]  # (launch ms for 36 layers, cv, serial share, ingress_rho_max[, ingress_s ms[, window]])
V_MS = (25.0, 30.0, TRACE_8B_MS, 40.0, 45.0)
CVS = (0.27, 0.45, 0.6)
SERIALS = (0.0, 0.25, 0.5)
RHOS = (0.0, 0.8)
INGRESS_MS = (0.0, 5.0, 10.0)  # --ingress
REFIT = ("e_kv", "o_step_s", "o_tok_s", "frontend_s", "ingress_per_seq_s")  # --refit: Qwen3-8B's own step terms
TOP = 3  # --refit: candidates per fold
Terms = dict[str, float]


def with_key(cal: Calibration, key: Key, seed: int = 0) -> Calibration:
    v, cv, serial, rho = key[:4]
    if len(key) > 4:
        cal = dataclasses.replace(cal, ingress_s=key[4] * 1e-3)
    if len(key) > 5 and key[5]:  # --window: the schedule after the launch (2, --peek: seen by the hold too), the
        # probe's time per prompt token
        cal = dataclasses.replace(cal, sched_after_launch=int(key[5]), ingress_tok_s=INGRESS_PROBE[1] * 1e-6)
    return dataclasses.replace(cal, prompt_hold=1, prompt_defer=0.0, prompt_lead_cpu=0,
                               prompt_cpu_step_s=v * 1e-3 * TRACE_FIXED_MS / TRACE_8B_MS,
                               prompt_cpu_layer_s=v * 1e-3 * TRACE_LAYER_MS / TRACE_8B_MS, prompt_cpu_step_cv=cv,
                               prompt_launch_serial=serial, ingress_rho_max=rho, jitter_seed=seed)


def losses(job: tuple[str | None, Key]) -> tuple[str | None, Key, dict[str, float]]:
    fold, key = job
    return fold, key, {FIT8: loss(with_key(base(fold, None), key)),
                       **{s: shape_loss(with_key(base(fold, s), key), s) for s in SHAPES}}


def refit_of(job: tuple[str | None, Key]) -> tuple[str | None, Key, Terms]:
    """The REFIT terms refitted on Qwen3-8B's loss, the key's terms in place, from the fold's base."""
    from benchmarks.calibrate_sim import fit
    fold, key = job
    cal, _ = fit(with_key(base(fold, None), key), rounds=4, step=1.15, free=REFIT)
    return fold, key, {name: getattr(cal, name) for name in REFIT}


def refitted_losses(job: tuple[str | None, Key, Terms]) -> dict[str, float]:
    fold, key, terms = job
    return {FIT8: loss(dataclasses.replace(with_key(base(fold, None), key), **terms)),  # type: ignore[arg-type]
            **{s: shape_loss(dataclasses.replace(with_key(base(fold, s), key), **terms), s)  # type: ignore[arg-type]
               for s in SHAPES}}


def grid(window: bool, measured: bool, ingress: bool, peek: bool = False,
         serials: tuple[float, ...] = SERIALS) -> list[Key]:
    """The keys a run chooses among (the docstring's forms)."""
    if window:  # the fourth form, or with `measured` the fifth (the sixth with `peek`): the probe's ingress, the
        # schedule after the launch
        v_ms, rhos = ((TRACE_8B_MS,), (0.8,)) if measured else (V_MS, RHOS)
        return list(itertools.product(v_ms, (0.27,), serials, rhos, (INGRESS_PROBE[0],), (2.0 if peek else 1.0,)))
    if ingress:  # the third form
        return list(itertools.product(V_MS, (0.27,), SERIALS, RHOS, INGRESS_MS))
    return list(itertools.product(V_MS, CVS, SERIALS, RHOS))


Table = dict[str | None, dict[Key, dict[str, float]]]  # base (None: FITTED's, FOLD4B: the 4B fold's) -> key -> losses


def grid_losses(keys: list[Key], jobs: int) -> Table:
    """Every key's fit losses from both bases (Qwen3-8B's and each shape's)."""
    table: Table = {None: {}, FOLD4B: {}}
    with Pool(jobs) as pool:
        for fold, key, row in pool.imap(losses, [(f, k) for f in (None, FOLD4B) for k in keys], chunksize=2):
            table[fold][key] = row
    return table


def choose(table: Table, keys: list[Key], refit: bool, jobs: int) -> tuple[dict[str, Key], dict[tuple[str | None, Key], Terms]]:
    """Each fold's key (leave-one-shape-out on the fit losses), and with `refit` the refitted Qwen3-8B step terms of
    each fold's TOP keys (the key then chosen among those)."""
    def score(fold: str, g: Key) -> float:  # the fold's loss: Qwen3-8B's and every shape's but its own
        rows = table[FOLD4B if fold == FOLD4B else None]
        return statistics.mean(rows[g][x] for x in (FIT8, *(s for s in SHAPES if s != fold)))

    def pick(fold: str, cands: list[Key]) -> Key:
        return min(cands, key=lambda g: score(fold, g))

    def ranked(fold: str) -> list[Key]:
        return sorted(keys, key=lambda g: score(fold, g))

    folds = (*SHAPES, "all")
    chosen: dict[str, Key] = {fold: pick(fold, keys) for fold in folds}
    terms: dict[tuple[str | None, Key], Terms] = {}
    if refit:
        todo = list(dict.fromkeys((FOLD4B if f == FOLD4B else None, g) for f in folds for g in ranked(f)[:TOP]))
        with Pool(jobs) as pool:
            terms = {(f, g): t for f, g, t in pool.map(refit_of, todo)}
            refitted = pool.map(refitted_losses, [(f, g, terms[(f, g)]) for f, g in todo])
        for (f, g), row in zip(todo, refitted, strict=True):
            table[f][g] = row
            print(f"refitted {'4B fold' if f else 'FITTED'} {g}: "
                  + " ".join(f"{n}={v:.4g}" for n, v in terms[(f, g)].items()) + " | "
                  + " ".join(f"{x}={row[x]:.5f}" for x in (FIT8, *SHAPES)), flush=True)
        chosen = {fold: pick(fold, [g for f, g in todo if f == (FOLD4B if fold == FOLD4B else None)])
                  for fold in folds}
    return chosen, terms


def calibration_of(fold: str | None, shape: str | None, key: Key, terms: dict[tuple[str | None, Key], Terms],
                   seed: int = 0) -> Calibration:
    """A fold's calibration for `shape`'s points (None: FITTED's points): its key and refitted terms on its base."""
    kind = FOLD4B if fold == FOLD4B else None
    extra = terms.get((kind, key), {})
    return dataclasses.replace(with_key(base(kind, shape), key, seed), **extra)  # type: ignore[arg-type]


def calibrations(chosen: dict[str, Key], terms: dict[tuple[str | None, Key], Terms]) -> dict[str, Calibration]:
    """The choice as calibrations: each held-out shape's fold, and "all" (FITTED's points)."""
    return {**{s: calibration_of(s, s, chosen[s], terms) for s in SHAPES},
            "all": calibration_of(None, None, chosen["all"], terms)}


def fold_calibrations(window: bool, measured: bool, ingress: bool, refit: bool, jobs: int = 2,
                      peek: bool = False, serials: tuple[float, ...] = SERIALS) -> dict[str, Calibration]:
    """What a run of this script chooses, as calibrations (`calibrations`)."""
    keys = grid(window, measured, ingress, peek, serials)
    return calibrations(*choose(grid_losses(keys, jobs), keys, refit, jobs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--refit", action="store_true", help="the second form (docstring): Qwen3-8B's step terms "
                    "refitted for each fold's best keys")
    ap.add_argument("--ingress", action="store_true", help="the third form (docstring): the API server's time per "
                    "new request in the grid, cv fixed at 0.27")
    ap.add_argument("--measured", action="store_true", help="with --window, the fifth form: launch and cv as the "
                    "traces measured them, rho 0.8; only the serial share on the grid")
    ap.add_argument("--window", action="store_true", help="the fourth form (docstring): the next step scheduled after "
                    "a step's launch, the API server's time per request as measured (no ingress column)")
    ap.add_argument("--peek", action="store_true", help="with --window --measured, the sixth form: the hold sees a "
                    "request that reaches the engine during a prompt step's launch")
    ap.add_argument("--serial", type=float, action="append", help="with --window --measured, the serial shares on "
                    "the grid (default 0, 0.25, 0.5; the seventh form: --peek --serial 0)")
    a = ap.parse_args()
    if (a.peek or a.serial) and not (a.window and a.measured):
        ap.error("--peek and --serial go with --window --measured (the sixth and seventh forms build on the fifth)")
    t0 = time.time()
    keys = grid(a.window, a.measured, a.ingress, a.peek, tuple(a.serial or SERIALS))
    table = grid_losses(keys, a.jobs)
    print(f"{'v ms':>5s} {'cv':>5s} {'ser':>5s} {'rho':>4s} | losses from FITTED: {FIT8:>9s} "
          + " ".join(f"{s:>10s}" for s in SHAPES) + f" | from the 4B fold's terms: {FIT8} + 1.7B / 14B / 32B")
    for key in keys:
        own, b4 = table[None][key], table[FOLD4B][key]
        print(f"{key[0]:5.1f} {key[1]:5.2f} {key[2]:5.2f} {key[3]:4.1f}"
              + (f" {key[4]:4.1f}" if len(key) > 4 else "") + (" win" if len(key) > 5 else "")
              + f" | {own[FIT8]:9.5f} "
              + " ".join(f"{own[s]:10.5f}" for s in SHAPES)
              + f" | {b4[FIT8]:.5f} " + " ".join(f"{b4[s]:.5f}" for s in SHAPES if s != FOLD4B), flush=True)
    chosen, terms = choose(table, keys, a.refit, a.jobs)

    def fold_cal(s: str, seed: int = 0) -> Calibration:
        return calibration_of(s, s, chosen[s], terms, seed)

    ship = [r for s in SHAPES for r in errs(shipped(s, a.window), shape_points(s))]
    print_draws(fold_cal, chosen, "launch ms (36 layers), cv, serial, rho", "hold LOSO")
    if a.window:
        print_draws(lambda s, seed: shipped(s, True, seed), {s: "HOLD" for s in SHAPES}, "shipped", "shipped")
    print(f"split=shape points={len(ship)} shipped: {medians(ship)}")
    before = HOLD if a.window else BEFORE
    print(f"all five shapes: key {chosen['all']}; 8B loss {table[None][chosen['all']][FIT8]:.5f} "
          f"(shipped {loss(before):.5f})")
    print(f"sla shipped: {sla({**{s: shipped(s, a.window) for s in SHAPES}, 'all': before})}")
    sim_shape_cpu.FITTED = before  # print_splits' "committed" rows: what shipped before
    cals = calibrations(chosen, terms)
    print_splits(cals)
    if terms:
        print(f"all-shape calibration: {cals['all']}")
    print(f"wall_s={time.time() - t0:.0f}")


if __name__ == "__main__":
    main()
