"""The same run five times: Qwen3-1.7B, one server, the same 300 prompts and Poisson draw (vllm bench --seed 0) at 24
req/s three times and 16 req/s twice (probe7.sh on the H200). Prints each run's figures and, per rate, the spread of
the percentiles the simulator is judged on: the noise floor of one measured P99 (issue 17).

    python3 benchmarks/results/h200/repeat-1.7b/summary.py
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

HERE = Path(__file__).parent
RUNS = {"24": ("24", "24.0", "24.00"), "16": ("16", "16.0")}
KEYS = ("output_throughput", "median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms", "median_itl_ms",
        "p99_itl_ms")


def main() -> None:
    print("run      " + "  ".join(f"{k:>17s}" for k in KEYS))
    for rate, names in RUNS.items():
        rows = [json.loads((HERE / f"bench_q17rep_r{n}.json").read_text()) for n in names]
        for n, d in zip(names, rows, strict=True):
            print(f"r{n:7s}" + "  ".join(f"{d[k]:17.1f}" for k in KEYS))
        spread = []
        for k in KEYS:
            vals = [d[k] for d in rows]
            spread.append(f"{(max(vals) - min(vals)) / statistics.mean(vals) * 100:16.0f}%")
        print(f"r{rate} range/mean " + "  ".join(spread)[3:])


if __name__ == "__main__":
    main()
