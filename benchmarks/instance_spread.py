"""Two server instances, one held-out point (issue 17): how far apart do they read, and where is the simulator?

The shape split's Qwen3-1.7B and -4B points were measured again on a fresh server (same vLLM 0.26.0 bundle, same
engine defaults, same `vllm bench serve` command, seed and prompt counts; `benchmarks/reference/*-i2`). Per point and
metric it prints the two measurements, their spread (|a - b| / their mean), and the committed simulator's error (the
shape's leave-one-shape-out floor terms, as the shape split) against each instance and against their mean; then the
medians over the points. A perfect deterministic model scores about half the spread against one instance: the median
spread is the floor under the shape split's errors on these points.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/instance_spread.py
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tuner.sim.reference import METRICS, RefPoint, bench_set_points, measured, shape_calibration, simulate

PAIRS = (("h200-vllm-0.26.0-qwen3-1.7b", "h200-vllm-0.26.0-qwen3-1.7b-i2"),
         ("h200-vllm-0.26.0-qwen3-4b", "h200-vllm-0.26.0-qwen3-4b-i2"))
SHORT = {"output_throughput": "tok/s", "p50_ttft_ms": "TTFT50", "p99_ttft_ms": "TTFT99", "p50_tpot_ms": "TPOT50",
         "p99_tpot_ms": "TPOT99", "p50_itl_ms": "ITL50", "p99_itl_ms": "ITL99"}


def pct(x: float, ref: float) -> float:
    return abs(x - ref) / ref * 100.0


def instance_pairs() -> list[tuple[RefPoint, RefPoint]]:
    """(the first instance's point, the second's) for every point both instances measured (same rate, same prompts)."""
    out = []
    for first, second in PAIRS:
        again = {p.rate: p for p in bench_set_points(second)}
        out += [(p, q) for p in bench_set_points(first) if (q := again.get(p.rate)) is not None and q.prompts == p.prompts]
    return out


def main() -> None:
    cols: dict[str, dict[str, list[float]]] = {k: {m: [] for m in METRICS} for k in ("spread", "a", "b", "mean")}
    for p, q in instance_pairs():
        a, b = measured(p), measured(q)
        s = simulate(p, shape_calibration(p.shape))  # same seed, same draw: both instances got these sends
        print(f"{p.name} (r{p.rate:g}, {p.prompts} prompts): instance 1 / instance 2 / sim")
        for m in METRICS:
            mid = (a[m] + b[m]) / 2
            row = {"spread": pct(a[m], mid) * 2, "a": pct(s[m], a[m]), "b": pct(s[m], b[m]), "mean": pct(s[m], mid)}
            for k, v in row.items():
                cols[k][m].append(v)
            print(f"  {SHORT[m]:<7} {a[m]:9.1f} {b[m]:9.1f} {s[m]:9.1f}   spread {row['spread']:5.1f} %   sim error "
                  f"vs 1 {row['a']:5.1f} vs 2 {row['b']:5.1f} vs mean {row['mean']:5.1f} %")
    n = len(cols["spread"][METRICS[0]])
    print(f"medians over {n} points (%):")
    labels = {"spread": "instance spread |1 - 2| / mean", "a": "sim vs instance 1 (the shape split's data)",
              "b": "sim vs instance 2", "mean": "sim vs the two instances' mean"}
    for k, label in labels.items():
        print(f"  {label:<44} " + " ".join(f"{SHORT[m]}={statistics.median(cols[k][m]):.1f}" for m in METRICS))


if __name__ == "__main__":
    main()
