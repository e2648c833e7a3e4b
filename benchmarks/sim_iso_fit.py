"""Qwen3-8B's isolated TTFT against its TTFT and TPOT under load: do the two agree on the prefill speed? (issue 17)

Part 1 fits the request terms (ingress ms, us per prompt token, admission ms per admitting step) and a prefill
efficiency scale k (e_lin, e_attn x k) on a grid to the H200 probe's isolated requests on Qwen3-8B, the fitted shape
(benchmarks/results/h200/ttft-breakdown/ttft_q8.json: median client TTFT per prompt length, one request at a time).
Part 2 runs the best of them at the loaded Qwen3-8B points measured with the same client (vllm bench serve, 2048/512,
300 prompts, Poisson at 4 / 8 / 12 req/s; benchmarks/results/h200/api-cpu-8b/), with the GPU's clock under sustained
compute (`heat_slowdown`) off and on, beside the committed calibration: the isolated probe runs at boost clock on an
idle GPU, the load points do not.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/sim_iso_fit.py
"""

from __future__ import annotations

import itertools
import json
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.sim_admit import ADMIT, cal_of
from tuner.load.records import Request
from tuner.sim.calibration import FITTED
from tuner.sim.cost import Calibration
from tuner.sim.engine import SimulatedEngine

H200 = Path(__file__).resolve().parent / "results" / "h200"
GRID = {"ing": (3.5, 4.4, 5.5), "tok": (2.0, 3.0, 4.0), "adm": (0.0, 3.0, 4.5, 6.0), "k": (1.0, 1.1, 1.2, 1.25, 1.3)}
HEAT = (0.0, 0.15, 0.25, 0.35)


def engine(cal: Calibration) -> SimulatedEngine:
    return SimulatedEngine(flavour="vllm", gpu="H200", shape="qwen3-8b", args={}, max_model_len=40960, calibration=cal)


def with_terms(ing: float, tok: float, adm: float, k: float, heat: float = 0.0) -> Calibration:
    """The committed fit with these request terms (admission per admitting step) and prefill scale: sim_admit.py's
    `cal_of`."""
    return cal_of(FITTED, (ing, tok, adm, k, 0.0, heat), ADMIT["step"])


def isolated() -> dict[int, float]:
    rows = json.loads((H200 / "ttft-breakdown" / "ttft_q8.json").read_text())
    return {n: statistics.median(r["ttft_s"] * 1e3 for r in rows if r["prompt_len"] == n)
            for n in sorted({r["prompt_len"] for r in rows})}


def loaded(cal: Calibration, rate: float, n: int) -> tuple[float, float, float, float]:
    """(mean, P50, P99 TTFT, P50 TPOT) ms with vllm bench's Poisson draw (seed 0, rescaled to n / rate)."""
    t = np.cumsum(np.random.RandomState(0).gamma(1.0, 1.0 / rate, n))
    t *= (n / rate) / t[-1]
    recs = engine(cal).run([Request(i, float(t[i]), 2048, 512) for i in range(n)])
    ttft = np.array([r.ttft_s for r in recs]) * 1e3
    tpot = [(r.done_s - r.first_token_s) / (len(r.token_times) - 1) * 1e3 for r in recs
            if r.done_s is not None and r.first_token_s is not None]
    return float(ttft.mean()), float(np.median(ttft)), float(np.percentile(ttft, 99)), float(np.median(tpot))


def main() -> None:
    real = isolated()
    print("isolated Qwen3-8B, median client TTFT ms: " + " ".join(f"{n}={v:.1f}" for n, v in real.items()))
    fits = []
    for ing, tok, adm, k in itertools.product(*GRID.values()):
        cal = with_terms(ing, tok, adm, k)
        sim = {n: engine(cal).run([Request(0, 0.0, n, 4)])[0].ttft_s * 1e3 for n in real}  # type: ignore[operator]
        fits.append((statistics.mean(abs(sim[n] / real[n] - 1) for n in real), (ing, tok, adm, k), sim))
    fits.sort(key=lambda f: f[0])
    for err, key, sim in fits[:5]:
        print(f"  ingress {key[0]} ms + {key[1]} us/tok, admit {key[2]} ms/step, k {key[3]}: mean |error| "
              f"{err * 100:.1f} % (" + " ".join(f"{v:.1f}" for v in sim.values()) + ")")
    best = fits[0][1]
    print(f"loaded Qwen3-8B (2048/512, 300 prompts): mean / P50 / P99 TTFT, P50 TPOT ms; terms {best}")
    for rate in (4, 8, 12):
        d = json.loads((H200 / "api-cpu-8b" / f"bench_q8load_r{rate}.json").read_text())
        line = (f"  r{rate} real {d['mean_ttft_ms']:.0f} / {d['median_ttft_ms']:.0f} / {d['p99_ttft_ms']:.0f}, "
                f"{d['median_tpot_ms']:.1f} | committed " + "{:.0f} / {:.0f} / {:.0f}, {:.1f}".format(
                    *loaded(FITTED, rate, int(d["num_prompts"]))))
        for heat in HEAT:
            line += f" | heat {heat} " + "{:.0f} / {:.0f} / {:.0f}, {:.1f}".format(
                *loaded(with_terms(*best, heat=heat), rate, int(d["num_prompts"])))
        print(line, flush=True)


if __name__ == "__main__":
    main()
