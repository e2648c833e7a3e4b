"""First-token floor vs prefill slope on five model shapes (issue 17): a leave-one-shape-out check.

With the weight-read floor (docs/sim.md, "Five shapes") decode steps hold on every shape, but the first token does
not: at 2 req/s the small shapes' P50 TTFT is ~25 ms above the simulator's (4B, 1.7B), Qwen3-8B is matched, and
14B / 32B are too slow in the simulator. That is the floor-vs-slope pattern of the decode steps again, now in the
prompt: a fixed latency per request that the 8B-only fit folded into the prefill efficiency. Form tried, two terms
that exist already: `frontend_s` (a fixed delay on every streamed token: it moves TTFT, not ITL or TPOT) and a scale k
on the prefill efficiencies (e_lin and e_attn x k). Grid d x k; each held-out shape's values are the grid point with
the least mean loss over the other shapes (Qwen3-8B: calibrate_sim.py's whole loss; another shape: the capped mean
|log error| of the seven `vllm bench` figures of its points), on the base fitted without it (SHAPE_LOSO). Rule fixed
before the run: adopt only if the 20-point shape split's P99 TTFT median drops by >= 3 points with TPOT, P99 ITL and
tok/s not worse by more than 0.5, and the args and rate splits' P99 TTFT not worse by more than 1 point.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/sim_shape_ttft.py

`--u-us 0,4,8,...` adds a third term on the same rule: `prompt_cpu_tok_s` (a step with new prompt tokens lasts at
least the same step without them + u x those tokens). Why all three at once: the per-request timelines put an isolated
2048-token prompt's effect on the other streams at ~13 ms after it was sent (ingress: d) and then a stall of ~25-29 ms
on Qwen3-1.7B whose GPU prefill is ~10 ms (a floor: u), while 8B-32B stall for less than the 8B-fitted prefill
efficiency says (k). Each pair was tried alone before (this script without u; sim_shape_cpu.py for u) and lost.
`--d-ms` and `--k` set those grids.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.calibrate_sim import loss
from benchmarks.sim_fidelity import medians
from benchmarks.sim_shape_cpu import FIT8, SHAPES, errs, print_splits, shape_loss, shape_points
from tuner.sim.calibration import FITTED
from tuner.sim.cost import Calibration
from tuner.sim.reference import shape_calibration

DS_MS = (0.1, 5.0, 10.0, 15.0, 20.0, 25.0)  # frontend_s grid, ms (0.1 = committed)
KS = (1.0, 1.1, 1.2, 1.3, 1.4, 1.5)  # prefill efficiency scale (e_lin 0.6 x 1.5 = 0.9 of peak at most)
US_US = (0.0,)  # prompt_cpu_tok_s grid, us per prompt token (0 = committed: off)
Key = tuple[float, float, float]
COMMITTED: Key = (0.1, 1.0, 0.0)


def base_for(held: str | None) -> Calibration:
    """The committed calibration, or the one whose floor terms were chosen without `held` (sim_shape_gpu.py)."""
    return FITTED if held is None else shape_calibration(held)


def cal_of(base: Calibration, key: Key) -> Calibration:
    d_ms, k, u_us = key
    return dataclasses.replace(base, frontend_s=d_ms * 1e-3, e_lin=base.e_lin * k, e_attn=base.e_attn * k,
                               prompt_cpu_tok_s=u_us * 1e-6)


def grid_losses(base: Calibration, grid: list[Key]) -> dict[Key, dict[str, float]]:
    out: dict[Key, dict[str, float]] = {}
    for key in grid:
        cal = cal_of(base, key)
        out[key] = {FIT8: loss(cal), **{s: shape_loss(cal, s) for s in SHAPES}}
        print(f"  d={key[0]:5.1f} ms k={key[1]:.2f} u={key[2]:4.1f} us " + " ".join(f"{s}={v:.5f}" for s, v in
                                                                          out[key].items()), flush=True)
    return out


def floats(text: str) -> tuple[float, ...]:
    return tuple(float(x) for x in text.split(","))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--d-ms", type=floats, default=DS_MS)
    ap.add_argument("--k", type=floats, default=KS)
    ap.add_argument("--u-us", type=floats, default=US_US)
    args = ap.parse_args()
    grid = sorted({COMMITTED, *((d, k, u) for d in args.d_ms for k in args.k for u in args.u_us)})
    t0 = time.process_time()
    bases = {"all": FITTED, **{s: base_for(s) for s in SHAPES if base_for(s) != FITTED}}
    losses = {}
    for name, base in bases.items():
        print(f"grid on base {name} (e_w={base.e_w}, w_floor_layer_s={base.w_floor_layer_s}):")
        losses[name] = grid_losses(base, grid)
    held_rows: list[dict[str, float]] = []
    fits: dict[str, Calibration] = {}
    for held in SHAPES:
        name = held if held in bases else "all"
        fit_on = (FIT8, *(s for s in SHAPES if s != held))
        key = min(losses[name], key=lambda g: statistics.mean(losses[name][g][s] for s in fit_on))
        fits[held] = cal_of(bases[name], key)
        rows = errs(fits[held], shape_points(held))
        held_rows += rows
        print(f"LOSO held out {held}: d={key[0]:g} ms k={key[1]:g} u={key[2]:g} us -> {medians(rows)}")
    print(f"split=shape points={len(held_rows)} LOSO: {medians(held_rows)}")
    committed = [r for s in SHAPES for r in errs(base_for(s), shape_points(s))]
    print(f"split=shape points={len(committed)} committed (floor terms LOSO, d and k as fitted): {medians(committed)}")
    key = min(losses["all"], key=lambda g: statistics.mean(losses["all"][g][s] for s in (FIT8, *SHAPES)))
    fits["all"] = cal_of(FITTED, key)
    print(f"fit on all five shapes: d={key[0]:g} ms k={key[1]:g} u={key[2]:g} us, 8b loss {losses['all'][key][FIT8]:.5f} "
          f"(committed {losses['all'][COMMITTED][FIT8]:.5f})")
    print_splits(fits)
    print(f"cpu_s={time.process_time() - t0:.0f}")


if __name__ == "__main__":
    main()
