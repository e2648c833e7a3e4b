"""Fitted efficiency factors and overheads (written by benchmarks/calibrate_sim.py; edit by re-fitting).

Fitted on real vLLM 0.26.0 runs on one H200 (benchmarks/reference/h200-vllm-0.26.0 and servetune's
own H200 studies, benchmarks/reference/h200-servetune*: the points named in FIT_SET of
tuner/sim/reference.py); other GPUs reuse these factors (see docs/sim.md).
"""

from __future__ import annotations

from tuner.sim.cost import Calibration

FITTED = Calibration(
    e_lin=0.6,
    e_w=0.730297,
    e_attn=0.666667,
    e_kv=0.8,
    o_step_s=0.000666664,
    o_tok_s=1.22474e-08,
    launch_per_layer_s=9.52361e-05,
    eager_mult=1.03478,
    frontend_s=0.0199578,
    allreduce_lat_s=8e-06,
    e_link=0.7,
)
