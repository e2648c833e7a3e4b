"""Diagnosis, not a model (issue 17): would the shape split's TTFT/TPOT misses close if the simulator's prefill
cost matched the measured one? Every 14B / 32B point is re-simulated with e_lin scaled per shape by the ratio of
simulated to measured prompt extra time in the isolated-prompt step timelines (benchmarks/prompt_steps.py, the
4.5 and 1.75 req/s rows: 88.6 / 77.6 on Qwen3-14B, 208.9 / 189.5 on Qwen3-32B). Uses the held-out data to set the
factor, so it says what a prefill-efficiency term would buy, not what a blind one would measure. "oracle+cap" adds
the lead-cap deferral form fitted on FIT_SET (refits.txt).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/reference/h200-vllm-0.26.0-qwen3-14b-np400/prefill_oracle.py
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any

from tuner.sim.calibration import FITTED
from tuner.sim.reference import ALL_POINTS, errors_pct, measured, simulate, split_of

RATIO = {"qwen3-14b": 88.6 / 77.6, "qwen3-32b": 208.9 / 189.5}
# the lead-cap deferral form fitted on FIT_SET (refits.txt): decodes see at most 34.5 ms of a prompt step's extra
LEAD_CAP: dict[str, Any] = {"prompt_defer": 0.0258651, "prompt_lead_max_s": 0.0344868}
KEYS = ("output_throughput", "p50_ttft_ms", "p99_ttft_ms", "p50_tpot_ms", "p99_tpot_ms", "p50_itl_ms", "p99_itl_ms")


def main() -> None:
    rows: dict[str, list[dict[str, float]]] = {"committed": [], "oracle": [], "oracle+cap": []}
    for p in ALL_POINTS:
        if split_of(p) != "shape":
            continue
        real = measured(p)
        oracle = dataclasses.replace(FITTED, e_lin=FITTED.e_lin * RATIO[p.shape])
        cap = dataclasses.replace(oracle, **LEAD_CAP)
        for name, cal in (("committed", FITTED), ("oracle", oracle), ("oracle+cap", cap)):
            err = errors_pct(simulate(p, cal), real)
            rows[name].append(err)
            print(f"{name:10s} {p.name:30s} " + " ".join(f"{k.replace('_ms', '')}={err[k]:5.1f}" for k in KEYS))
    for name, errs in rows.items():
        print(f"{name:10s} split=shape points={len(errs)} median_abs_error_pct: "
              + " ".join(f"{k.replace('_ms', '')}={statistics.median(e[k] for e in errs):.1f}" for k in KEYS))


if __name__ == "__main__":
    main()
