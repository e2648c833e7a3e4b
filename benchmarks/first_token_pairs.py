"""A request followed closely by another: how much later its first token comes, engine vs simulator (issue 17).

For each request A whose previous send was > 150 ms earlier, B is the next send; A's excess TTFT is A's TTFT less the
median TTFT of the isolated requests (no send within 150 ms either side), averaged per bin of B's lag behind A. Both
server instances of the 1.7B and 4B shape points (benchmarks/instance_spread.py's pairs: the same sends) and the H100
blind runs (benchmarks/sim_blind.py's sets, one instance each) are read; the simulator is fed each run's measured sends
and lengths. vLLM's engine core launches step N, schedules and launches step N+1, then hands out step N's tokens, so a
prompt that comes in during a prompt step's 20-35 ms launch holds that step's first tokens for its own launch
(docs/sim.md, "A prompt in during a launch holds the first token"; the calibration's `sched_after_launch` 2).

Simulator columns (shape points on their leave-one-shape-out terms): `hold` (the calibration shipped before the
peek: benchmarks/sim_hold_fit.py's HOLD), `window` (hold + sched_after_launch 1), `peek` (hold + sched_after_launch 2,
nothing refitted) and `now` (the shipped calibration). Blind runs: the engine and `now` only.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/first_token_pairs.py   # output results/sim/first_token_pairs.txt
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.instance_spread import instance_pairs
from benchmarks.sim_blind import points as blind_points
from benchmarks.sim_hold_fit import shipped as hold_of
from tuner.sim.calibration import FITTED
from tuner.sim.cost import Calibration
from tuner.sim.detailed import BenchRun, bench_requests, bench_run, load_json
from tuner.sim.engine import SimulatedEngine
from tuner.sim.reference import client_arrivals, detailed_run, shape_calibration

BINS = ((0, 10), (10, 20), (20, 30), (30, 40), (40, 60), (60, 100))
ISOLATED_MS = 150.0
MIN_ISOLATED = 5  # a run with fewer isolated requests has no baseline to speak of (the 24-32 req/s points)


def gaps(sends_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each request's gap (ms) to the send before it and to the send after it."""
    return np.diff(sends_s, prepend=-1e9) * 1e3, np.append(np.diff(sends_s), 1e9) * 1e3


def excess(ttft_ms: np.ndarray, sends_s: np.ndarray) -> list[float]:
    """A's mean excess TTFT (ms) per bin of B's lag (nan where the bin is empty)."""
    gp, gn = gaps(sends_s)
    base = float(np.median(ttft_ms[(gp > ISOLATED_MS) & (gn > ISOLATED_MS)]))
    out = []
    for lo, hi in BINS:
        m = (gn >= lo) & (gn < hi) & (gp > ISOLATED_MS)
        out.append(float(ttft_ms[m].mean()) - base if m.any() else float("nan"))  # nan: no A with B that far
    return out


def isolated(sends_s: np.ndarray) -> int:
    gp, gn = gaps(sends_s)
    return int(((gp > ISOLATED_MS) & (gn > ISOLATED_MS)).sum())


def counts(sends_s: np.ndarray) -> list[int]:
    gp, gn = gaps(sends_s)
    return [int(((gn >= lo) & (gn < hi) & (gp > ISOLATED_MS)).sum()) for lo, hi in BINS]


def simulated(run: BenchRun, sends: np.ndarray, shape: str, args: dict[str, object], cal: Calibration,
              gpu: str) -> np.ndarray:
    eng = SimulatedEngine(flavour="vllm", gpu=gpu, shape=shape, args=args, max_model_len=40960, calibration=cal)
    return np.array([r.ttft_s for r in eng.run(bench_requests(run, sends))]) * 1e3


def row(label: str, values: list[float], n: list[int]) -> str:
    """The bins, then their mean over B 0-40 ms behind, weighted by the bins' counts."""
    pairs = [(c, v) for c, v in zip(n[:4], values[:4], strict=True) if c and v == v]
    near = sum(c * v for c, v in pairs) / sum(c for c, _ in pairs) if pairs else float("nan")
    return f"    {label:10s} " + " ".join(f"{v:7.1f}" for v in values) + f"  | 0-40: {near:6.1f}"


def main() -> None:
    print("A's mean excess TTFT (ms) over the isolated requests' median, by B's lag behind A (ms): "
          + " ".join(f"{f'[{lo},{hi})':>7s}" for lo, hi in BINS) + "  | 0-40: their count-weighted mean over B 0-40 ms behind")
    print("H200 shape points, both server instances (the same sends):")
    for p, q in instance_pairs():
        a, b = detailed_run(p), detailed_run(q)
        assert a is not None and b is not None
        sends = client_arrivals(p)
        if isolated(sends) < MIN_ISOLATED:
            print(f"  {p.name}: {isolated(sends)} isolated requests (< {MIN_ISOLATED}): skipped")
            continue
        hold = hold_of(p.shape, window=True)
        cals = {"hold": hold, "window": dataclasses.replace(hold, sched_after_launch=1),
                "peek": dataclasses.replace(hold, sched_after_launch=2), "now": shape_calibration(p.shape)}
        n = counts(sends)
        print(f"  {p.name} (n per bin: {' '.join(str(c) for c in n)})")
        print(row("instance 1", excess(np.array(a.ttfts) * 1e3, sends), n))
        print(row("instance 2", excess(np.array(b.ttfts) * 1e3, sends), n))
        for label, cal in cals.items():
            print(row(f"sim {label}", excess(simulated(a, sends, p.shape, p.args, cal, "H200"), sends), n))
    print("H100 blind runs (one instance each; never fitted on):")
    for name, f, shape, args in blind_points():
        run = bench_run(load_json(f))
        if not run.start_times:
            continue
        sends = np.array(run.start_times)
        if isolated(sends) < MIN_ISOLATED:
            print(f"  {name} {f.name.removesuffix('.json.gz')}: {isolated(sends)} isolated requests: skipped")
            continue
        n = counts(sends)
        print(f"  {name} {f.name.removesuffix('.json.gz')} {shape} (n per bin: {' '.join(str(c) for c in n)})")
        print(row("engine", excess(np.array(run.ttfts) * 1e3, sends), n))
        print(row("sim now", excess(simulated(run, np.zeros(len(run)), shape, args, FITTED, "H100"), sends), n))


if __name__ == "__main__":
    main()
