"""benchmarks/sim_fidelity.py under a calibration override (issue 17's refits after the detailed sets; nothing here
is used by the simulator). Prints the split, per-shape-set, SLA and last lines, e.g.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/reference/h200-vllm-0.26.0-qwen3-14b-np400/eval_calibration.py \
        prompt_defer=0.0258651,prompt_lead_max_s=0.0344868
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

# the runner of the earlier deferral forms, with the per-shape-set lines added
DRIVER = Path(__file__).resolve().parents[1] / "h200-vllm-0.26.0-qwen3-14b" / "defer_forms.py"

if __name__ == "__main__":
    summary = runpy.run_path(str(DRIVER), run_name="defer_forms")["summary"]
    summary(sys.argv[1] if len(sys.argv) > 1 else "",
            ("split=", "  shape set", "sla_verdicts", "median_abs_error_pct="))
