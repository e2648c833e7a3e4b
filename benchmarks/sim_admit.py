"""The request-admission terms measured on the H200, through the five-shape fidelity check (issue 17).

benchmarks/ttft_breakdown.py measured, one request at a time on an idle vLLM 0.26 server and with one other
request decoding (results in benchmarks/results/h200/ttft-breakdown/):
- the API server's share of TTFT (client TTFT - the engine's queue and prefill times): ~4.5 ms + ~3 us per
  prompt token, on every shape -> `ingress_s`, `ingress_tok_s`;
- a new 16-token prompt stalls a running decode by ~12 ms less its step on Qwen3-1.7B, -4B and -8B, and not on
  -32B (its step is 19 ms) -> `admit_cpu_s`: a step that admits k new requests ends k x that - (the step before)
  later, when positive (tuner/sim/fit.py).
The committed calibration has none of the three (its fit folded them into the prefill efficiency); this script
forces them on with the values read off the Qwen3-8B probe (the fitted shape: no held-out shape's data), and
chooses only the prefill efficiency scale k (e_lin, e_attn x k), leave-one-shape-out, on a grid. `--grid` also
lets each fold pick smaller terms or none (x0, x0.5, x1, x1.5 of each; LOSO as well). Same losses and splits as
benchmarks/sim_shape_ttft.py; the rule fixed before the run is that script's.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/sim_admit.py [--grid] [--form step]
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
from benchmarks.sim_shape_ttft import base_for
from tuner.sim.calibration import FITTED
from tuner.sim.cost import Calibration

MEASURED = (4.5, 3.0, 12.0)  # ingress ms, ingress us per prompt token, admit ms: the Qwen3-8B probe
KS = (0.9, 1.0, 1.1, 1.2)  # prefill efficiency scale
# ingress ms, us/token, admit ms, k, API server us per streamed token, heat_slowdown (the clock under sustained compute)
Key = tuple[float, float, float, float, float, float]
COMMITTED: Key = (0.0, 0.0, 0.0, 1.0, 0.0, 0.0)
API_PASSES = 3  # --api: passes of each run that settle the ingress times behind the streaming (tuner/sim/api_server.py)
ADMIT = {"request": "admit_cpu_s", "step": "admit_step_s"}  # --form: the admission cost per request or per step


def cal_of(base: Calibration, key: Key, admit: str = ADMIT["request"]) -> Calibration:
    """`base` with the key's terms; the admit figure goes to the field `admit` names. A key with API-server CPU
    per streamed token runs the coupled API server (ingress queued behind the streaming), which replaces the
    per-running-sequence ingress wait (`ingress_per_seq_s`, its earlier stand-in)."""
    ing, tok, adm, k, api, heat = key
    cal = dataclasses.replace(base, ingress_s=ing * 1e-3, ingress_tok_s=tok * 1e-6, e_lin=base.e_lin * k,
                              e_attn=base.e_attn * k, **{admit: adm * 1e-3})  # type: ignore[arg-type]
    if heat:
        cal = dataclasses.replace(cal, heat_slowdown=heat)
    if api:
        cal = dataclasses.replace(cal, stream_tok_s=api * 1e-6, api_passes=API_PASSES, ingress_per_seq_s=0.0)
    return cal


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grid", action="store_true", help="also search the three terms (x0, x0.5, x1, x1.5 of each)")
    ap.add_argument("--form", choices=tuple(ADMIT), default="request", help="the admission cost per admitted "
                    "request (admit_cpu_s) or per admitting step (admit_step_s: what the burst probe shows)")
    ap.add_argument("--api", default="", help="comma list of API-server CPU per streamed token (us) to add as "
                    "choices: the coupled API server (tuner/sim/api_server.py) with each; '' = off")
    ap.add_argument("--measured", default="", help="ingress ms,us per prompt token,admit ms forced on (default: "
                    "the Qwen3-8B probe's 4.5,3,12)")
    ap.add_argument("--ks", default="", help="comma list of prefill efficiency scales to choose from (default "
                    "0.9,1,1.1,1.2)")
    ap.add_argument("--heat", default="", help="comma list of heat_slowdown values to choose from (the GPU's clock "
                    "under sustained compute: the isolated probe runs at boost clock, the load points do not)")
    a = ap.parse_args()
    admit = ADMIT[a.form]
    apis = [0.0] if not a.api else [float(x) for x in a.api.split(",")]
    measured = MEASURED if not a.measured else tuple(float(x) for x in a.measured.split(","))
    ks = KS if not a.ks else tuple(float(x) for x in a.ks.split(","))
    heats = [0.0] if not a.heat else [float(x) for x in a.heat.split(",")]
    terms = [measured]
    if a.grid:
        terms = sorted({(i * f1, t * f2, m * f3) for i, t, m in [measured] for f1 in (0, 1) for f2 in (0, 1)
                        for f3 in (0, 0.5, 1, 1.5)})
    keys = {(*t, k, u, h) for t in terms for k in ks for u in apis for h in heats}
    grid: list[Key] = sorted({COMMITTED, *keys})  # type: ignore[arg-type]
    t0 = time.process_time()
    bases = {"all": FITTED, **{s: base_for(s) for s in SHAPES if base_for(s) != FITTED}}
    losses: dict[str, dict[Key, dict[str, float]]] = {}
    for name, base in bases.items():
        print(f"grid on base {name}:", flush=True)
        losses[name] = {}
        for key in grid:
            cal = cal_of(base, key, admit)
            losses[name][key] = {FIT8: loss(cal), **{s: shape_loss(cal, s) for s in SHAPES}}
            print(f"  ingress={key[0]:g} ms + {key[1]:g} us/tok admit={key[2]:g} ms k={key[3]:g} api={key[4]:g} us "
                  f"heat={key[5]:g} "
                  + " ".join(f"{s}={v:.5f}" for s, v in losses[name][key].items()), flush=True)
    pickable = [g for g in grid if a.grid or g != COMMITTED]  # without --grid the measured terms are forced on
    fits: dict[str, Calibration] = {}
    held_rows = []
    for held in SHAPES:
        name = held if held in bases else "all"
        fit_on = (FIT8, *(s for s in SHAPES if s != held))
        key = min(pickable, key=lambda g: statistics.mean(losses[name][g][s] for s in fit_on))
        fits[held] = cal_of(bases[name], key, admit)
        rows = errs(fits[held], shape_points(held))
        held_rows += rows
        print(f"LOSO held out {held}: {key} -> {medians(rows)}")
    print(f"split=shape points={len(held_rows)} LOSO with the terms: {medians(held_rows)}")
    committed = [r for s in SHAPES for r in errs(base_for(s), shape_points(s))]
    print(f"split=shape points={len(committed)} committed: {medians(committed)}")
    key = min(pickable, key=lambda g: statistics.mean(losses["all"][g][s] for s in (FIT8, *SHAPES)))
    fits["all"] = cal_of(FITTED, key, admit)
    print(f"fit on all five shapes: {key}, 8b loss {losses['all'][key][FIT8]:.5f} "
          f"(committed {losses['all'][COMMITTED][FIT8]:.5f})")
    print_splits(fits)
    print(f"cpu_s={time.process_time() - t0:.0f}")


if __name__ == "__main__":
    main()
