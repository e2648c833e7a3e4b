"""A Qwen3-8B-only refit with the isolated probe's request terms and prefill speed, and the GPU's clock under load
(issue 17).

benchmarks/sim_iso_fit.py finds that Qwen3-8B's isolated requests want a ~20 % faster prefill than the committed fit
plus ~4.4 ms of API-server ingress, ~3 us per prompt token and ~4.5 ms of engine admission per admitting step, while
its load points then want the compute slowed again under sustained load (`heat_slowdown`, the H200's clock under its
power limit). This holds those measured terms and the prefill scale fixed, refits the terms that shape a step under
load (heat_slowdown, prompt_defer, prompt_lead_max_s, o_step_s, ingress_per_seq_s) on the Qwen3-8B loss only
(calibrate_sim.py's points and coordinate search), and checks the result on every split: no other shape's data
enters the fit, so each shape's points are held out (each with its own committed floor terms, SHAPE_LOSO).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/sim_heat_refit.py [--terms 4.4,3,4.5] [--k 1.2] [--heat 0.25] [--api 100 [--fit-api]]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.calibrate_sim import coordinate_search, loss, render
from benchmarks.sim_admit import ADMIT, cal_of
from benchmarks.sim_fidelity import medians
from benchmarks.sim_shape_cpu import SHAPES, errs, print_splits, shape_points
from tuner.sim.calibration import FITTED
from tuner.sim.cost import Calibration
from tuner.sim.reference import shape_calibration

FREE = ("heat_slowdown", "prompt_defer", "prompt_lead_max_s", "o_step_s", "ingress_per_seq_s")
MOVED = (*FREE, "ingress_s", "ingress_tok_s", "admit_step_s", "admit_cpu_s", "e_lin", "e_attn", "stream_tok_s",
         "api_passes", "stream_chunk_s")


def start(terms: tuple[float, float, float], k: float, heat: float, api_us: float = 0.0,
          chunk_us: float = 0.0, form: str = "step") -> Calibration:
    """The committed fit with the isolated probe's terms (admission per admitting step); with `api_us`, the coupled
    API server at that CPU per streamed token (api-cpu-8b: 94-109 us): sim_admit.py's `cal_of`; with `chunk_us`,
    that server batches as vLLM's output handler does, `api_us` per token plus `chunk_us` per SSE chunk."""
    cal = cal_of(FITTED, (*terms, k, api_us, heat), ADMIT[form])
    return dataclasses.replace(cal, stream_chunk_s=chunk_us * 1e-6)


def onto(base: Calibration, fit: Calibration) -> Calibration:
    """`base` (a shape's committed floor terms) with the refit's values."""
    return dataclasses.replace(base, **{f: getattr(fit, f) for f in MOVED})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--terms", default="4.4,3,4.5", help="ingress ms, us per prompt token, admission ms per step "
                    "(benchmarks/results/sim/sim_iso_fit.txt)")
    ap.add_argument("--k", type=float, default=1.2, help="prefill efficiency scale from the isolated probe")
    ap.add_argument("--heat", type=float, default=0.25, help="heat_slowdown to start from")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--api", type=float, default=0.0, help="> 0: the coupled API server at this many us per "
                    "streamed token (ingress_per_seq_s then off and not refitted)")
    ap.add_argument("--fit-api", action="store_true", help="with --api: refit stream_tok_s too, from that start")
    ap.add_argument("--chunk", type=float, default=0.0, help="with --api: the output handler's batching, this many "
                    "us per SSE chunk on top of --api's us per token (api-cpu-8b: the two sum to 94-109 us idle)")
    ap.add_argument("--form", choices=tuple(ADMIT), default="step", help="the admission term per admitting step "
                    "(admit_step_s) or per admitted request (admit_cpu_s: the isolated probe's ~12 ms on 8B)")
    ap.add_argument("--free-more", default="", help="comma list of further fields to refit on 8B (e.g. e_lin,e_attn: "
                    "the prefill speed, which the committed fit slowed to hold the admission time)")
    a = ap.parse_args()
    t0 = time.process_time()
    terms = tuple(float(x) for x in a.terms.split(","))
    assert len(terms) == 3, "--terms takes three numbers"
    first = start(terms, a.k, a.heat, a.api, a.chunk, a.form)  # type: ignore[arg-type]
    free = tuple(f for f in FREE if not (a.api and f == "ingress_per_seq_s")) + (("stream_tok_s",) if a.fit_api else ())
    free += tuple(f for f in a.free_more.split(",") if f)
    print(f"start: 8B loss {loss(first):.5f} (committed {loss(FITTED):.5f})", flush=True)
    fit, value = coordinate_search(first, a.rounds, 1.5, free, loss_fn=loss, label="8B refit")
    print(f"refit: 8B loss {value:.5f}; " + " ".join(f"{f}={getattr(fit, f):.6g}" for f in free), flush=True)
    held, committed = [], []
    for s in SHAPES:
        rows = errs(onto(shape_calibration(s), fit), shape_points(s))
        held += rows
        committed += errs(shape_calibration(s), shape_points(s))
        print(f"held out {s}: {medians(rows)}")
    print(f"split=shape points={len(held)} 8B-only refit: {medians(held)}")
    print(f"split=shape points={len(committed)} committed: {medians(committed)}")
    print_splits({**{s: onto(shape_calibration(s), fit) for s in SHAPES}, "all": fit})
    print("refit:\n" + render(fit).split("FITTED = ")[1].split("\n)")[0] + "\n)")
    print(f"cpu_s={time.process_time() - t0:.0f}")


if __name__ == "__main__":
    main()
