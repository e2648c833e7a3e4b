"""benchmarks/sim_fidelity.py under a calibration override (issue 17's refits after the detailed sets; nothing here
is used by the simulator). Prints the split, per-shape-set, SLA and last lines, e.g.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/reference/h200-vllm-0.26.0-qwen3-14b-np400/eval_calibration.py \
        prompt_defer=0.0258651,prompt_lead_max_s=0.0344868
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


def main() -> None:
    over = dict(item.split("=") for item in filter(None, sys.argv[1].split(","))) if len(sys.argv) > 1 else {}
    values: dict[str, Any] = {k: int(float(v)) if k == "sched_ahead" else float(v) for k, v in over.items()}
    engine.FITTED = dataclasses.replace(FITTED, **values)  # the engines' default calibration
    sys.argv = sys.argv[:1]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        runpy.run_path(str(FIDELITY), run_name="__main__")
    for line in out.getvalue().splitlines():
        if line.startswith(("split=", "  shape set", "sla_verdicts", "median_abs_error_pct=")):
            print(line)


if __name__ == "__main__":
    main()
