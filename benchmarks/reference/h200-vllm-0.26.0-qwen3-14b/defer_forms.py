"""The prompt-deferral forms tried for issue 17 (rejected; nothing here is used by the simulator).

Needs the forms' code, which was not kept: `git apply` this folder's defer_forms.patch first (it adds
`Calibration.prompt_defer_s`, the fixed-time form, and `prompt_defer_tok_s`, the per-token form, and lets
benchmarks/calibrate_sim.py fit them). Then prints benchmarks/sim_fidelity.py's split, SLA and last lines for
the calibration with the given overrides, e.g.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/reference/h200-vllm-0.26.0-qwen3-14b/defer_forms.py \
        prompt_defer_tok_s=7.13797e-06,prompt_lead_max_s=0
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import runpy
import sys
from pathlib import Path
from typing import Any

import tuner.sim.engine as engine
from tuner.sim.calibration import FITTED

FIDELITY = Path(__file__).resolve().parents[2] / "sim_fidelity.py"


def summary(spec: str, prefixes: tuple[str, ...] = ("split=", "sla_verdicts", "median_abs_error_pct=")) -> None:
    """sim_fidelity.py under FITTED with `spec` ("k=v,k=v") replaced, printing only the lines that start with
    `prefixes` (also used by ../h200-vllm-0.26.0-qwen3-14b-np400/eval_calibration.py)."""
    over = dict(item.split("=") for item in filter(None, spec.split(",")))
    values: dict[str, Any] = {k: int(float(v)) if k == "sched_ahead" else float(v) for k, v in over.items()}
    engine.FITTED = dataclasses.replace(FITTED, **values)  # the engines' default calibration
    argv, sys.argv = sys.argv, sys.argv[:1]
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(str(FIDELITY), run_name="__main__")
    finally:
        sys.argv = argv
    for line in out.getvalue().splitlines():
        if line.startswith(prefixes):
            print(line)


if __name__ == "__main__":
    summary(sys.argv[1] if len(sys.argv) > 1 else "")
