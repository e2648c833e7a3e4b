"""How long vLLM's engine core takes to launch a prompt step, per H100 host and by the sequences running (issue 17).

Why: the shipped simulator holds the step before a prompt step for the launch, drawn around 14.1 ms + 0.575 ms per
layer (two traces: 8B and 1.7B). The blind H100 runs (benchmarks/sim_blind.py) show 1.7B's prompt-step intervals
at ~20 ms where that gives 30, and 4B's at ~42 as it gives. This reads the four step traces (each on its own H100
host, vLLM 0.26.0, engine defaults, 2048-token prompts): the `execute_model` CPU time (x: the step's preparation and
kernel launches) of steps with prompt tokens, by the sequences running, and of decode steps, with a least-squares
line x = a + b running + c new prompts + d thousand prompt tokens.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/launch_by_host.py > benchmarks/results/sim/launch_by_host.txt
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.step_trace import load_trace, steps

H100 = Path(__file__).resolve().parent / "results" / "h100"
TRACES = {"Qwen3-1.7B, 24 req/s (q17t)": H100 / "step-trace" / "trace_q17t",
          "Qwen3-4B, 12-20 req/s (q4t)": H100 / "step-trace-4b" / "trace_q4t",
          "Qwen3-4B, 8-10 req/s (q4u)": H100 / "step-trace-4b" / "trace_q4u",
          "Qwen3-8B, 6-12 req/s (q8t)": H100 / "step-trace" / "trace_q8t"}
BANDS = ((0, 8), (8, 32), (32, 64), (64, 128), (128, 256), (256, 1024))


def main() -> None:
    for label, folder in TRACES.items():
        a = np.array([(s["x"][1] - s["x"][0], s["running"], s["ptoks"], s["new"]) for s in steps(load_trace(folder))
                      if "x" in s], dtype=float)
        prompt, decode = a[a[:, 2] > 0], a[a[:, 2] == 0]
        print(f"{label}: {len(prompt)} prompt steps, x median {np.median(prompt[:, 0]) * 1e3:.1f} ms; "
              f"{len(decode)} decode steps, x median {np.median(decode[:, 0]) * 1e3:.2f} ms")
        for lo, hi in BANDS:
            p = prompt[(prompt[:, 1] >= lo) & (prompt[:, 1] < hi)]
            d = decode[(decode[:, 1] >= lo) & (decode[:, 1] < hi)]
            if len(p) >= 3:
                print(f"  running {lo:4d}-{hi:<4d} prompt steps n={len(p):4d} x p10/50/90 "
                      + "/".join(f"{v:.1f}" for v in np.percentile(p[:, 0], (10, 50, 90)) * 1e3)
                      + f" ms | decode x median {np.median(d[:, 0]) * 1e3 if len(d) else float('nan'):.2f} ms")
        x = np.c_[np.ones(len(prompt)), prompt[:, 1], prompt[:, 3], prompt[:, 2] / 1e3]
        c, *_ = np.linalg.lstsq(x, prompt[:, 0] * 1e3, rcond=None)
        print(f"  least squares: x ms = {c[0]:.2f} + {c[1]:.4f} running + {c[2]:.2f} new prompts + {c[3]:.2f} per 1000 "
              "prompt tokens")


if __name__ == "__main__":
    main()
