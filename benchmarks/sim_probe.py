"""benchmarks/ttft_breakdown.py's two probes in the simulator's virtual time, beside the H200 measurements (issue 17).

Per shape and prompt length: the median client TTFT of isolated requests (one at a time, idle engine), and with
one other request decoding (a 16-token prompt, 150 tokens, the probe sent at its 30th token) that stream's
largest gap and stall (sum of its gaps beyond its median gap, from the probe's send to the probe's first token +
20 ms): what one new prompt does to a running decode, which is where ITL tails start. Real figures are read
from benchmarks/results/h200/ttft-breakdown/ (vLLM 0.26.0, dummy weights, engine defaults).

`--bursts`: the burst probe instead (ttft_breakdown.py --burst B --streams S: B new prompts sent at once beside S
running decodes; real figures from ttft-breakdown/burst/): the stall of the first running stream and the burst's
median TTFT, real/sim.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/sim_probe.py [--terms 4.5,3,12[,12]] [--bursts]
    # ingress ms, us/token, admit ms per request[, per admitting step]
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
SHAPES = {"q17": "qwen3-1.7b", "q4": "qwen3-4b", "q8": "qwen3-8b", "q14": "qwen3-14b", "q32": "qwen3-32b"}
BG_LEN, BG_OUT, BG_AT, OUT = 16, 150, 30, 32


def engine(shape: str, cal: Calibration) -> SimulatedEngine:
    return SimulatedEngine(flavour="vllm", gpu="H200", shape=shape, args={}, max_model_len=40960, calibration=cal)


def isolated(eng: SimulatedEngine, n_in: int, n: int = 10) -> float:
    recs = eng.run([Request(i, i * 2.0, n_in, OUT) for i in range(n)])  # 2 s apart: each alone, as measured
    return statistics.median((r.first_token_s - r.sent_s) * 1e3 for r in recs if r.first_token_s is not None)


def background(eng: SimulatedEngine, n_in: int, streams: int = 1, burst: int = 1,
               bg_out: int = BG_OUT) -> tuple[float, float, float, float]:
    """(the first background stream's median gap, its largest gap and its stall in the probe's window, the
    burst's median TTFT), ms."""
    bgs = [Request(k, 0.0, BG_LEN, bg_out) for k in range(streams)]
    alone = eng.run(bgs)[0]
    t_send = alone.token_times[BG_AT - 1]
    recs = eng.run(bgs + [Request(streams + k, t_send, n_in, OUT) for k in range(burst)])
    bg, probes = recs[0], recs[streams:]
    assert all(p.first_token_s is not None for p in probes)
    ttft = statistics.median((p.first_token_s or 0.0) - t_send for p in probes) * 1e3
    times = list(bg.token_times)
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    end = max(p.first_token_s or 0.0 for p in probes) + 0.020
    inside = [b - a for a, b in zip(times, times[1:], strict=False) if b > t_send and a < end]
    base = statistics.median(gaps)
    return base * 1e3, max(inside) * 1e3, sum(max(g - base, 0.0) for g in inside) * 1e3, ttft


def _real(name: str) -> list[dict]:
    path = REAL / name if (REAL / name).exists() else REAL / "burst" / name
    return json.loads(path.read_text())


def bursts(tag: str, shape: str, cal: Calibration) -> None:
    """The burst probe's rows of one shape: real/sim stall and median TTFT per streams, burst and prompt."""
    eng = engine(shape, cal)
    for path in sorted((REAL / "burst").glob(f"burst_{tag}_s*_b*.json"),
                       key=lambda p: [int(x) for x in p.stem.split("_s")[1].split("_b")]):
        streams, burst = (int(x) for x in path.stem.split("_s")[1].split("_b"))
        rows = json.loads(path.read_text())
        for L in sorted({r["prompt_len"] for r in rows}):
            rs = [r for r in rows if r["prompt_len"] == L and r["i"] >= 2]
            stall = statistics.median(r["bg_stall_s"] for r in rs) * 1e3
            ttft = statistics.median(r["ttft_s"] for r in rs) * 1e3
            sim = background(eng, L, streams, burst, bg_out=200)
            print(f"{shape:<12} {streams:>3} {burst:>3} {L:>6}   stall {stall:7.1f} / {sim[2]:7.1f}   "
                  f"TTFT {ttft:7.1f} / {sim[3]:7.1f}")


def real_rows(tag: str) -> tuple[dict[int, float], dict[int, tuple[float, float, float]]]:
    iso, bgr = _real(f"ttft_{tag}.json"), _real(f"ttft_{tag}_bg.json")

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
    ap.add_argument("--bursts", action="store_true", help="the burst probe (ttft-breakdown/burst/) instead")
    a = ap.parse_args()
    if a.bursts:
        print("shape   streams burst prompt   stall of a running decode real/sim (ms)   burst's median TTFT real/sim")
    else:
        print("shape        prompt  isolated TTFT real/sim (ms)   with one decode running, real/sim (ms): "
              "median gap, largest gap, stall")
    for tag, shape in SHAPES.items():
        cal = FITTED if shape == "qwen3-8b" else shape_calibration(shape)
        if a.terms:
            ing, tok, adm, step = ([float(x) for x in a.terms.split(",")] + [0.0])[:4]
            cal = dataclasses.replace(cal, ingress_s=ing * 1e-3, ingress_tok_s=tok * 1e-6, admit_cpu_s=adm * 1e-3,
                                      admit_step_s=step * 1e-3)
        if a.k != 1.0:
            cal = dataclasses.replace(cal, e_lin=cal.e_lin * a.k, e_attn=cal.e_attn * a.k)
        if a.bursts:
            bursts(tag, shape, cal)
            continue
        eng = engine(shape, cal)
        iso, bgr = real_rows(tag)
        for L, real in iso.items():
            line = f"{shape:<12} {L:>6}  {real:8.1f} / {isolated(eng, L):6.1f}"
            if L in bgr:
                sim = background(eng, L)
                line += "             " + "  ".join(f"{r:6.1f} / {s:6.1f}" for r, s in zip(bgr[L], sim[:3], strict=True))
            print(line)


if __name__ == "__main__":
    main()
