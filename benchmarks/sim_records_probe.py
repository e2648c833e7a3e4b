"""The simulator gate's host fit on servetune's own records of real engines, judged by rules fixed before the runs (issue 17).

Why: the gate (tuner/search/study_gate.py) fits two host factors on a measured trial's `requests.parquet`, written by
servetune's client, and predicts every later trial with them. Every real-engine probe so far was measured with
`vllm bench serve`; the records path was tested on the simulator only. The runs read here
(benchmarks/results/gpu-records/<server>/) are measured after this file and its rules were committed: real vLLM
0.26.0 servers (the GPU recipe's pack, dummy weights), each driven by scripts/h200/client_rates.py (tuner.load.target
.HttpTarget, token-id prompts, Poisson, 8 warm-ups, seed 0) at four rates, lowest first; engine arguments that no
fit set used (SERVERS below).

Protocol, per server, exactly the gate's path: the lowest-rate run is the probe; its records are read as the gate reads
a trial's (tuner.sim.detailed.records_run), the factors are fitted by tuner.sim.host.fit_host_run with the gate's grids
and max_model_len 40960 (the servers' context), and the calibration is apply_host(FITTED, launch, step). Each other run
is replayed (its measured send times and lengths) through the simulator, one draw (jitter_seed 0), on the GPU the set
names, and judged against the run's own figures as the records give them (measured_figures: TTFT from send to first
token, TPOT per request, ITL between socket reads, as `vllm bench serve` counts stream events).

R1, the gate's fit holds on servetune's records: pooled over every server's judged runs, no figure's median |error| with
    the fitted factors is worse than the shipped calibration's by more than 1 point.
R2, the gate would use the fits: every probe's fit is trusted (HostFit.trusted: its ITL percentiles within 25 % on
    average).
Reported either way; a miss is said in docs/sim.md. Smoke-tested before the runs on the simulator's own server (the
shipped calibration itself, Qwen3-8B on H100 at max_num_batched_tokens 4096, 100 requests at 3 and 8 req/s): the fit
read launch x1 step x1.1 (3.4 % off, trusted), and R1 did not hold there (P99 TTFT 2.5 -> 7.9 %, P50 TPOT 0.8 ->
4.9 %): on a host the calibration already matches, the fit has nothing to remove and its grid step costs a few points.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/sim_records_probe.py   # output results/sim/sim_records_probe.txt
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.sim_fidelity import SHORT, medians
from tuner.load.records import RequestRecord
from tuner.sim.calibration import FITTED
from tuner.sim.cost import Calibration
from tuner.sim.detailed import bench_requests, records_run
from tuner.sim.engine import SimulatedEngine
from tuner.sim.host import apply_host, fit_host_run
from tuner.sim.reference import METRICS, errors_pct, figures

ROOT = Path(__file__).resolve().parent / "results" / "gpu-records"
MAX_MODEL_LEN = 40960
# server -> (shape, engine arguments as the study would give them); fixed before the runs (scripts/h200/client_sweep.sh)
SERVERS: dict[str, tuple[str, dict[str, Any]]] = {
    "c8": ("qwen3-8b", {"max_num_batched_tokens": 4096}),
    "c4": ("qwen3-4b", {"max_num_seqs": 64}),
    "c17": ("qwen3-1.7b", {"max_num_batched_tokens": 2048}),
}


def load(path: Path) -> list[RequestRecord]:
    with gzip.open(path, "rt") as f:
        rows = json.load(f)["records"]
    return [RequestRecord(**row) for row in rows]


def measured_figures(records: list[RequestRecord]) -> dict[str, float]:
    """A run's figures from its records (tuner.sim.reference.figures on the measured successes), with the ITL taken
    between socket reads (tuner.sim.detailed.records_run, as `vllm bench serve` counts stream events)."""
    ok = [r for r in records if r.ok and not r.warmup]
    out = figures(ok)
    itl = np.concatenate([np.asarray(x) for x in records_run(ok).itls if len(x)]) * 1e3
    out["p50_itl_ms"], out["p99_itl_ms"] = float(np.percentile(itl, 50)), float(np.percentile(itl, 99))
    return out


def simulated_figures(records: list[RequestRecord], shape: str, args: dict[str, Any], gpu: str,
                      cal: Calibration) -> dict[str, float]:
    """The simulator on the run's measured sends and lengths (as the gate replays a trial)."""
    run = records_run(records)
    eng = SimulatedEngine(flavour="vllm", gpu=gpu, shape=shape, args=args, max_model_len=MAX_MODEL_LEN, calibration=cal)
    return figures(eng.run(bench_requests(run, np.zeros(len(run)))))


def runs_of(root: Path, server: str) -> list[Path]:
    """A server's runs (`<server>/r<RATE>.json.gz`), lowest rate first."""
    return sorted(root.glob(f"{server}/r*.json.gz"), key=lambda p: float(p.name[1:].removesuffix(".json.gz")))


def gpu_of(root: Path) -> str:
    txt = (root / "gpu.txt").read_text() if (root / "gpu.txt").exists() else ""
    return "H200" if "H200" in txt else "H100"


def main() -> None:
    gpu = gpu_of(ROOT)
    pooled: dict[str, list[dict[str, float]]] = {"shipped": [], "host": []}
    trusted = []
    for name, (shape, args) in SERVERS.items():
        runs = runs_of(ROOT, name)
        if len(runs) < 2:
            print(f"server {name}: {len(runs)} runs, not judged")
            continue
        probe, rest = load(runs[0]), runs[1:]
        fit = fit_host_run(records_run(probe), shape, gpu, args, MAX_MODEL_LEN)
        trusted.append(fit.trusted)
        print(f"server {name} ({gpu}, {shape}, {args}): probe {runs[0].name}, {fit.requests} requests: launch "
              f"x{fit.launch:g} step x{fit.step:g}, {fit.off:.1%} off ({'trusted' if fit.trusted else 'NOT trusted'}; "
              f"{fit.off_calibrated:.1%} as shipped)", flush=True)
        cals = {"shipped": FITTED, "host": apply_host(FITTED, fit.launch, fit.step)}
        for f in rest:
            recs = load(f)
            real = measured_figures(recs)
            for lb, cal in cals.items():
                sim = simulated_figures(recs, shape, args, gpu, cal)
                err = errors_pct(sim, real)
                pooled[lb].append(err)
                print(f"  {f.name.removesuffix('.json.gz'):6s} {lb:8s} "
                      + "  ".join(f"{SHORT[m]} {sim[m]:.1f}/{real[m]:.1f} {err[m]:.0f}%" for m in METRICS), flush=True)
    if not pooled["shipped"]:
        print("no runs measured")
        return
    for lb, rows in pooled.items():
        print(f"judged runs={len(rows)} calibration={lb} median_abs_error_pct: {medians(rows)}")
    med = {lb: {m: float(np.median([r[m] for r in rows])) for m in METRICS} for lb, rows in pooled.items()}
    r1 = all(med["host"][m] <= med["shipped"][m] + 1 for m in METRICS)
    print(f"R1 (the gate's fit on servetune's records, no figure worse by > 1): {'holds' if r1 else 'does NOT hold'}")
    print(f"R2 (every probe's fit trusted): {'holds' if all(trusted) else 'does NOT hold'} ({sum(trusted)} of "
          f"{len(trusted)})")


if __name__ == "__main__":
    main()
