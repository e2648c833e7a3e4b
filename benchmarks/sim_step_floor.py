"""A prompt step's CPU floor with a fixed part per step, chosen leave-one-shape-out (issue 17).

Why: the per-request timelines (benchmarks/prompt_steps.py, `prompt_steps_five_shapes.txt`) hold the other streams
for ~24-29 ms around an isolated 2048-token prompt on Qwen3-1.7B at every rate (2-16 req/s), where the simulator's
GPU prefill gives ~10; on 8B-32B the GPU prefill (35-190 ms) covers it. The per-token floor (`prompt_cpu_tok_s`,
sim_shape_cpu.py) reaches that, but charges a step with several prompts several times over and saturated Qwen3-1.7B at
24-32 req/s (held-out TPOT +44 %), where the real engine keeps up; a burst of 8 new prompts stalls a running decode by
9-27 ms, not 8 x 12 (ttft_breakdown.py --burst). So the floor here is F per step that carries new prompt tokens plus
u per prompt token (`prompt_cpu_step_s`, `prompt_cpu_tok_s`), on the committed calibration (each held-out shape with
its own leave-one-shape-out weight terms). Each held-out shape's (F, u) minimises the mean loss of Qwen3-8B
(calibrate_sim's) and the other shapes (sim_shape_cpu's); the args and rate splits get the pair chosen on all five.

Rule fixed before the run (sim_shape_ttft.py's, TPOT read as P50 and P99): adopt only if the shape split's P99 TTFT
median drops by >= 3 points, its P50 and P99 TPOT, P99 ITL and tok/s are not worse by more than 0.5, the args and rate
splits' P99 TTFT not worse by more than 1, and the SLA verdicts agree as often.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/sim_step_floor.py [--f-ms 0,8,12,16,20,24] [--u-us 0,2,4,6]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.calibrate_sim import loss
from benchmarks.sim_fidelity import medians
from benchmarks.sim_shape_cpu import FIT8, SHAPES, errs, loso_pick, print_splits, shape_loss, shape_points
from tuner.sim.calibration import FITTED
from tuner.sim.cost import Calibration
from tuner.sim.reference import shape_calibration

Key = tuple[float, float]  # (F ms per prompt step, u us per prompt token)


def with_floor(cal: Calibration, key: Key) -> Calibration:
    return dataclasses.replace(cal, prompt_cpu_step_s=key[0] * 1e-3, prompt_cpu_tok_s=key[1] * 1e-6)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--f-ms", default="0,8,12,16,20,24", help="fixed floor per prompt step, ms")
    ap.add_argument("--u-us", default="0,2,4,6", help="floor per prompt token, us")
    a = ap.parse_args()
    t0 = time.process_time()
    grid = [(f, u) for f in map(float, a.f_ms.split(",")) for u in map(float, a.u_us.split(","))]
    losses: dict[Key, dict[str, float]] = {}
    print(f"{'F ms':>5s} {'u us':>5s} {FIT8:>9s} " + " ".join(f"{s:>10s}" for s in SHAPES))
    for key in grid:
        losses[key] = {FIT8: loss(with_floor(FITTED, key)),
                       **{s: shape_loss(with_floor(shape_calibration(s), key), s) for s in SHAPES}}
        print(f"{key[0]:5.1f} {key[1]:5.1f} {losses[key][FIT8]:9.5f} "
              + " ".join(f"{losses[key][s]:10.5f}" for s in SHAPES), flush=True)

    chosen = loso_pick(grid, losses)
    held, committed = [], []
    for s in SHAPES:
        rows = errs(with_floor(shape_calibration(s), chosen[s]), shape_points(s))
        held += rows
        committed += errs(shape_calibration(s), shape_points(s))
        print(f"held out {s}: F={chosen[s][0]:g} ms u={chosen[s][1]:g} us: {medians(rows)}")
    print(f"split=shape points={len(held)} step floor LOSO: {medians(held)}")
    print(f"split=shape points={len(committed)} committed: {medians(committed)}")
    print(f"all five shapes: F={chosen['all'][0]:g} ms u={chosen['all'][1]:g} us; 8B loss "
          f"{losses[chosen['all']][FIT8]:.5f} (committed {loss(FITTED):.5f})")
    print_splits({**{s: with_floor(shape_calibration(s), chosen[s]) for s in SHAPES},
                  "all": with_floor(FITTED, chosen["all"])})
    print(f"cpu_s={time.process_time() - t0:.0f}")


if __name__ == "__main__":
    main()
