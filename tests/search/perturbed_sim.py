"""A "real engine" the simulator mispredicts: the simulated engine's HTTP server with its fitted cost terms
perturbed by known factors (the setting of benchmarks/sim_in_loop.py), launched by a study as its vLLM command.

    python tests/search/perturbed_sim.py --model Qwen/Qwen3-8B --port 8000 [vLLM flags]
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import tuner.sim.engine as sim_engine
from tuner.sim.calibration import FITTED

PERTURB = {"e_lin": 0.85, "e_w": 1.2, "e_kv": 0.8, "o_step_s": 1.25}  # factors on the fitted values

if __name__ == "__main__":
    sim_engine.FITTED = replace(FITTED, **{k: getattr(FITTED, k) * f for k, f in PERTURB.items()})
    from tuner.sim.server import main

    main()
