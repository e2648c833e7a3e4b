"""benchmarks/ttft_breakdown.py's two probes in the simulator's virtual time, beside the H200 measurements (issue 17).

Per shape and prompt length: the median client TTFT of isolated requests (one at a time, idle engine), and with
one other request decoding (a 16-token prompt, 150 tokens, the probe sent at its 30th token) that stream's
largest gap and stall (sum of its gaps beyond its median gap, from the probe's send to the probe's first token +
20 ms): what one new prompt does to a running decode, which is where ITL tails start. Real figures are read
from benchmarks/results/h200/ttft-breakdown/ (vLLM 0.26.0, dummy weights, engine defaults).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/sim_probe.py [--terms 4.5,3,12]   # ingress ms, us/token, admit ms
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tuner.load.records import Request
from tuner.sim.calibration import FITTED
from tuner.sim.cost import Calibration
from tuner.sim.engine import SimulatedEngine
from tuner.sim.reference import shape_calibration

REAL = Path(__file__).resolve().parent / "results" / "h200" / "ttft-breakdown"
SHAPES = {"q17": "qwen3-1.7b", "q4": "qwen3-4b", "q8": "qwen3-8b", "q32": "qwen3-32b"}
BG_LEN, BG_OUT, BG_AT, OUT = 16, 150, 30, 32


def engine(shape: str, cal: Calibration) -> SimulatedEngine:
    return SimulatedEngine(flavour="vllm", gpu="H200", shape=shape, args={}, max_model_len=40960, calibration=cal)


def isolated(eng: SimulatedEngine, n_in: int, n: int = 10) -> float:
    recs = eng.run([Request(i, i * 2.0, n_in, OUT) for i in range(n)])  # 2 s apart: each alone, as measured
    return statistics.median((r.first_token_s - r.sent_s) * 1e3 for r in recs if r.first_token_s is not None)


def background(eng: SimulatedEngine, n_in: int) -> tuple[float, float, float]:
    """(the background stream's median gap, its largest gap and its stall in the probe's window), ms."""
    alone = eng.run([Request(0, 0.0, BG_LEN, BG_OUT)])[0]
    t_send = alone.token_times[BG_AT - 1]
    bg, probe = eng.run([Request(0, 0.0, BG_LEN, BG_OUT), Request(1, t_send, n_in, OUT)])
    assert probe.first_token_s is not None
    times = list(bg.token_times)
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    end = probe.first_token_s + 0.020
    inside = [b - a for a, b in zip(times, times[1:], strict=False) if b > t_send and a < end]
    base = statistics.median(gaps)
    return base * 1e3, max(inside) * 1e3, sum(max(g - base, 0.0) for g in inside) * 1e3


def real_rows(tag: str) -> tuple[dict[int, float], dict[int, tuple[float, float, float]]]:
    iso = json.loads((REAL / f"ttft_{tag}.json").read_text())
    bgr = json.loads((REAL / f"ttft_{tag}_bg.json").read_text())

    def med(rows: list[dict], key: str) -> float:
        return statistics.median(r[key] for r in rows) * 1e3

    out_iso = {L: med([r for r in iso if r["prompt_len"] == L and r["i"] >= 2], "ttft_s")
               for L in sorted({r["prompt_len"] for r in iso})}
    out_bg = {}
    for L in sorted({r["prompt_len"] for r in bgr}):
        rs = [r for r in bgr if r["prompt_len"] == L and r["i"] >= 2]
        out_bg[L] = (med(rs, "bg_median_gap_s"), med(rs, "bg_max_gap_s"), med(rs, "bg_stall_s"))
    return out_iso, out_bg


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--terms", default=None, help="ingress ms, ingress us per prompt token, admit ms (default: "
                    "the committed calibration's)")
    ap.add_argument("--k", type=float, default=1.0, help="prefill efficiency scale (e_lin, e_attn x k)")
    a = ap.parse_args()
    print("shape        prompt  isolated TTFT real/sim (ms)   with one decode running, real/sim (ms): "
          "median gap, largest gap, stall")
    for tag, shape in SHAPES.items():
        cal = FITTED if shape == "qwen3-8b" else shape_calibration(shape)
        if a.terms:
            ing, tok, adm = (float(x) for x in a.terms.split(","))
            cal = dataclasses.replace(cal, ingress_s=ing * 1e-3, ingress_tok_s=tok * 1e-6, admit_cpu_s=adm * 1e-3)
        if a.k != 1.0:
            cal = dataclasses.replace(cal, e_lin=cal.e_lin * a.k, e_attn=cal.e_attn * a.k)
        eng = engine(shape, cal)
        iso, bgr = real_rows(tag)
        for L, real in iso.items():
            line = f"{shape:<12} {L:>6}  {real:8.1f} / {isolated(eng, L):6.1f}"
            if L in bgr:
                sim = background(eng, L)
                line += "             " + "  ".join(f"{r:6.1f} / {s:6.1f}" for r, s in zip(bgr[L], sim, strict=True))
            print(line)


if __name__ == "__main__":
    main()
