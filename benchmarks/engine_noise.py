"""The engine's own noise: how far two servers fed the same sends read one request's TTFT, real and simulated (issue 17).

Two server instances measured the shape split's Qwen3-1.7B and -4B points with the same `vllm bench serve` command
and seed, so the same requests went out at the same times (send times within 4 ms; `benchmarks/reference/*-i2`).
Per request the two TTFTs differ by d: at 4B 16 req/s the standard deviation of d is 50 ms, its median |d| 24 ms, and
the slowest 3 % of requests are mostly different requests on the two servers (`instance_spread.py` compares their
percentiles). That spread is the engine's own noise, not the arrivals'. The simulator fed the same sends twice with
two draws of its random terms (`jitter_seed` 0 / 1 and 2 / 3) reads d with about half that spread (24 ms there):
its only random term is the prompt step's launch. A noise-free engine has a narrower TTFT distribution than a noisy
one with the same arrivals, so its P99 TTFT runs low (the shape split's small shapes: 10-25 % short at 8-20 req/s).

Term (`Calibration.ingress_cv`, tuner/sim/fit.py): the API server's time per new request (`ingress_s` +
`ingress_tok_s` x prompt tokens, served one request at a time) drawn per request from a gamma distribution of that
mean and this coefficient of variation. Chosen here on the pair statistics alone, never on a P99 error: for each cv
on the grid, the mean over a shape's points of |log(sim / real)| of three figures of d (its standard deviation, the
median and the 90th percentile of |d|), the simulator on each shape's leave-one-shape-out terms
(`reference.shape_calibration`). Leave-one-shape-out: the Qwen3-1.7B fold takes the cv that fits the 4B pairs best,
the 4B fold the one that fits 1.7B's; every other shape (and FITTED) the cv that fits both. So no shape-split point is
simulated with a cv chosen on its own shape's pairs.

The term was found with a what-if before this script (cv 1 on every shape, the pair statistics printed, and the
replayed P99 TTFTs of the 1.7B and 4B points with it, which that what-if also printed); the choice below is made on the
pair statistics only.

Rule fixed before `benchmarks/sim_fidelity.py` runs with the chosen values (commit before its output): adopt only if,
against the shipped calibration (shape split at jitter_seed 0 / 1 / 2: P99 TTFT 10.5 / 10.2 / 10.7, P99 ITL 14.2 /
10.8 / 11.9; `sim_hold_fit_measured.txt`'s "shipped" lines),
  1. the shape split's P99 TTFT median drops by >= 1 point or is <= 10 %, and its P99 ITL median is <= 10 % or not
     worse by more than 0.5;
  2. the shape split's P50 and P99 TPOT and tok/s medians are <= 5 % or not worse by more than 0.5;
  3. the args split's P99 TTFT and P99 ITL and the rate split's P99 TTFT are <= 10 % or not worse by more than 1, and
     the args split's P50 and P99 TPOT <= 5 % or not worse by more than 0.5;
  4. the SLA verdicts agree as often as shipped (sim_fidelity.py's held-out count, 57 / 57);
  5. with the other draws (`jitter_seed` 1 and 2) the shape split's P99 TTFT is not worse than shipped's same draw
     by more than 0.5 and its P99 ITL not worse by more than 1.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/engine_noise.py [--cv 0,0.5,1]
    # output benchmarks/results/sim/engine_noise.txt; --draws: the shape split of the calibration as written on three
    # draws (rule 5)

Run (engine_noise.txt, 4 s): the Qwen3-1.7B fold chose cv 1 (on 4B's pairs), the 4B fold 1.5 (on 1.7B's, whose mean
loss is set by its 24 and 32 req/s pairs: d's standard deviation 234 and 147 ms, the stalls instance_spread.py found
not reproducible, which no per-request gamma reaches), all pairs 1. With those written (FITTED 1, the 4B fold 1.5),
`sim_fidelity.py` (output `sim_fidelity_ingress_cv.txt`): shape P99 TTFT 10.5 -> 7.8, P99 ITL 14.2 -> 9.5, but P50 /
P99 TPOT 5.3 / 4.7 -> 5.9 / 5.3 (rule 2: worse by 0.6); args P99 TTFT / ITL 7.1 / 7.8, rate P99 TTFT 7.8, SLA 57 / 57;
`--draws`: P99 TTFT 7.8 / 15.0 / 10.7, P99 ITL 9.5 / 10.2 / 7.6 on jitter_seed 0 / 1 / 2 (rule 5: the second draw's
P99 TTFT worse than shipped's 10.2 by 4.8). **Rejected** (rules 2 and 5); the shipped calibration keeps ingress_cv 0.
A simulator as noisy as the engine reads a noisier P99 from one run of itself: the median over five draws (a what-if
after the decision, not a rule's run) gave shape P99 TTFT 8.1 / 10.1 / 10.0 and P99 ITL 10.0 / 8.4 / 8.3 on seeds
0-4 / 5-9 / 10-14, against 10.4 / 10.7 / 9.7 and 12.0 / 11.0 / 9.9 without the term, P50 TPOT 5.5 / 5.3 / 5.7 with it
and 5.6 / 5.3 / 5.1 without.

Second run, on the decode line (`sim_decode_fit.py`'s chosen e_w and floor, rejected alone by its rule 2 on P99 TTFT,
written in the working tree as its run left them): this script chooses the cv again, the same way, on that base (the
pair statistics depend on it), and both are judged together. Disclosed: each part's held-out results were seen before
this pairing was chosen (the noise term cut P99 TTFT and cost TPOT; the decode line cut TPOT and cost P99 TTFT), and the
decode line's blind H100 figures too. Rule fixed before the run (commit before its output): adopt both only if,
against the shipped calibration (shape split at jitter_seed 0 / 1 / 2: P99 TTFT 10.5 / 10.2 / 10.7, P99 ITL 14.2 / 10.8
/ 11.9, P50 TPOT 5.3 / 5.5 / 5.6),
  1. the shape split's P99 TTFT median is <= 10 % or 1 point lower, and its P99 ITL median <= 10 % or 3 points lower;
  2. the shape split's P50 and P99 TPOT and tok/s medians are <= 5 % or not worse by more than 0.5;
  3. the args split's P99 TTFT and P99 ITL and the rate split's P99 TTFT are <= 10 % or not worse by more than 1, and
     the args split's P50 and P99 TPOT <= 5 % or not worse by more than 0.5;
  4. the SLA verdicts agree as often as shipped (57 / 57);
  5. on the other draws (jitter_seed 1 and 2) the shape split's P99 TTFT and P99 ITL are not worse than shipped's same
     draw by more than 1, and its P50 TPOT is <= 5 % or not worse than shipped's same draw;
  6. on the blind H100 sets (`sim_blind.py`, the 14 new points, the `shipped` row: FITTED as written) the P99 TTFT,
     P99 ITL and P50 TPOT medians are not worse than the shipped calibration's (12.8, 11.5, 8.1) by more than 1.

Second run (engine_noise_decode.txt): the 1.7B fold chose cv 1, the 4B fold 1.5, all pairs 1.25. With those and the
decode line written, `sim_fidelity.py` (sim_fidelity_decode_noise.txt): shape P99 TTFT 6.8, P99 ITL 8.2, P50 / P99
TPOT 3.3 / 4.9, tok/s 0.9; args P99 TTFT / ITL 7.8 / 3.7, P50 / P99 TPOT 2.0 / 2.4; rate P99 TTFT 7.8; SLA 57 / 57;
last line `median_abs_error_pct=3.1 p99_ttft_err_pct=7.3 p99_itl_err_pct=6.7 heldout=29`. `--draws`
(engine_noise_decode_draws.txt): P99 TTFT 6.8 / 11.9 / 10.0, P99 ITL 8.2 / 11.1 / 7.2, P50 TPOT 3.3 / 4.0 / 3.9 on
jitter_seed 0 / 1 / 2. Blind H100 sets (`sim_blind.py`, sim_blind_decode_noise.txt, the `shipped` row): P99 TTFT 9.9,
P99 ITL 8.4, P50 TPOT 4.6 (shipped 12.8, 11.5, 8.1). Rules 1-4 and 6 met; **rule 5 not met** (the second draw's P99
TTFT 11.9 against shipped's 10.2, worse by 1.7): rejected on these splits, the shipped calibration unchanged. Whether
the pair is better is left to data no form has seen: benchmarks/sim_confirm.py, its rule fixed before the runs.
"""


from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.instance_spread import instance_pairs
from tuner.sim.calibration import FITTED
from tuner.sim.cost import Calibration
from tuner.sim.detailed import BenchRun, bench_requests
from tuner.sim.engine import SimulatedEngine
from tuner.sim.reference import RefPoint, client_arrivals, detailed_run, shape_calibration

GRID = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0)
SEED_PAIRS = ((0, 1), (2, 3))
STATS = ("sd", "p50", "p90")


def stats(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    """Figures of the per-request TTFT difference (ms) between two runs of the same sends."""
    n = min(len(a), len(b))
    d = a[:n] - b[:n]
    return {"sd": float(d.std()), "p50": float(np.percentile(np.abs(d), 50)), "p90": float(np.percentile(np.abs(d), 90))}


def ttfts(eng: SimulatedEngine, run: BenchRun, drawn: np.ndarray) -> np.ndarray:
    """Per request, in send order, the simulated TTFT (ms) of a measured run's sends (`drawn` where it has none)."""
    recs = sorted(eng.run(bench_requests(run, drawn)), key=lambda r: r.id)
    return np.array([(r.first_token_s or math.nan) - r.sent_s for r in recs]) * 1e3


def sim_ttfts(p: RefPoint, run: BenchRun, cal: Calibration) -> np.ndarray:
    eng = SimulatedEngine(flavour="vllm", gpu="H200", shape=p.shape, args=p.args, max_model_len=p.max_model_len,
                          calibration=cal)
    return ttfts(eng, run, client_arrivals(p))


def sim_stats(p: RefPoint, run: BenchRun, cal: Calibration) -> dict[str, float]:
    """The pair figures of the simulator, averaged over SEED_PAIRS."""
    rows = [stats(sim_ttfts(p, run, dataclasses.replace(cal, jitter_seed=a)),
                  sim_ttfts(p, run, dataclasses.replace(cal, jitter_seed=b))) for a, b in SEED_PAIRS]
    return {k: statistics.fmean(r[k] for r in rows) for k in STATS}


def pair_points() -> list[tuple[RefPoint, BenchRun, dict[str, float]]]:
    """(point, its first instance's run, the real pair figures) for every point measured on both instances."""
    out = []
    for p, q in instance_pairs():
        ra, rb = detailed_run(p), detailed_run(q)
        if ra is not None and rb is not None:
            out.append((p, ra, stats(np.array(ra.ttfts) * 1e3, np.array(rb.ttfts) * 1e3)))
    return out


def h100_pairs() -> None:
    """The pair figures of the two H100 servers fed the same sends (gpu-confirm c8 / c8i2, c17 / c17i2), real and
    simulated on the H100 with FITTED and three ingress_cv values (a check after the decision, on another host)."""
    from tuner.sim.detailed import bench_run, load_json

    root = Path(__file__).resolve().parent / "results" / "gpu-confirm"
    for a, b in (("c8", "c8i2"), ("c17", "c17i2")):
        pa, pb = (json.loads((root / x / "points.json").read_text()) for x in (a, b))
        for x, y in zip(pa, pb, strict=True):
            ra, rb = (bench_run(load_json(root / s / p["file"])) for s, p in ((a, x), (b, y)))
            real = stats(np.array(ra.ttfts) * 1e3, np.array(rb.ttfts) * 1e3)
            cells = []
            for cv in (0.0, 1.0, 1.25):
                tt = []
                for seed in (0, 1):
                    eng = SimulatedEngine(flavour="vllm", gpu="H100", shape=x["shape"], args={}, max_model_len=40960,
                                          calibration=dataclasses.replace(FITTED, ingress_cv=cv, jitter_seed=seed))
                    tt.append(ttfts(eng, ra, np.zeros(len(ra))))
                s = stats(*tt)
                cells.append(f"sim cv {cv:g}: {s['sd']:5.1f} /{s['p50']:5.1f} /{s['p90']:6.1f}")
            print(f"{a}/{x['name']:<14} real d: sd / |d|50 / |d|90 ms {real['sd']:5.1f} /{real['p50']:5.1f} /"
                  f"{real['p90']:6.1f}   " + "   ".join(cells))


def loss(sim: dict[str, float], real: dict[str, float]) -> float:
    return statistics.fmean(abs(math.log(max(sim[k], 1e-6) / real[k])) for k in STATS)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cv", default=",".join(f"{c:g}" for c in GRID), help="the ingress_cv grid")
    ap.add_argument("--h100", action="store_true",
                    help="only the pair figures of the H100 second servers (benchmarks/results/gpu-confirm), real and "
                         "simulated with ingress_cv 0, 1 and 1.25 on FITTED")
    ap.add_argument("--draws", action="store_true",
                    help="only the shape split of the calibration as written, on jitter_seed 0 / 1 / 2 (rule 5)")
    args = ap.parse_args()
    if args.h100:
        h100_pairs()
        return
    if args.draws:
        from benchmarks.sim_shape_cpu import print_draws

        print_draws(lambda s, seed: dataclasses.replace(shape_calibration(s), jitter_seed=seed),
                    {s: shape_calibration(s).ingress_cv for s in ("qwen3-1.7b", "qwen3-4b", "qwen3-14b", "qwen3-32b")},
                    "ingress_cv", "as written")
        return
    grid = [float(x) for x in args.cv.split(",")]
    points = pair_points()
    shapes = sorted({p.shape for p, _, _ in points})
    table: dict[tuple[str, float], dict[str, float]] = {}
    print("point                          real d: sd / |d|50 / |d|90 ms | sim per ingress_cv: sd / |d|50 / |d|90 (loss)")
    for p, run, real in points:
        base = shape_calibration(p.shape)
        cells = []
        for cv in grid:
            s = sim_stats(p, run, dataclasses.replace(base, ingress_cv=cv))
            table[(p.name, cv)] = s
            cells.append(f"cv {cv:g}: {s['sd']:5.1f} /{s['p50']:5.1f} /{s['p90']:6.1f} ({loss(s, real):.2f})")
        print(f"{p.name:<30} {real['sd']:6.1f} /{real['p50']:5.1f} /{real['p90']:6.1f}   " + "  ".join(cells))
    print("mean loss by shape:")
    by_shape = {s: {cv: statistics.fmean(loss(table[(p.name, cv)], real) for p, _, real in points if p.shape == s)
                    for cv in grid} for s in shapes}
    for s in shapes:
        print(f"  {s:<12} " + "  ".join(f"cv {cv:g}: {v:.3f}" for cv, v in by_shape[s].items()))
    both = {cv: statistics.fmean(by_shape[s][cv] for s in shapes) for cv in grid}
    print("  both         " + "  ".join(f"cv {cv:g}: {v:.3f}" for cv, v in both.items()))
    pick_all = min(grid, key=lambda cv: both[cv])
    for s in shapes:
        others = [o for o in shapes if o != s]
        pick = min(grid, key=lambda cv: statistics.fmean(by_shape[o][cv] for o in others))
        print(f"fold {s} held out: ingress_cv = {pick:g} (chosen on {', '.join(others)})")
    print(f"all pairs: ingress_cv = {pick_all:g} (FITTED and every shape without pairs; shipped before: "
          f"{FITTED.ingress_cv:g})")


if __name__ == "__main__":
    main()
