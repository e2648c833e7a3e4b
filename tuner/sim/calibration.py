"""Fitted efficiency factors and overheads (written by benchmarks/calibrate_sim.py; edit by re-fitting).

Fitted on real vLLM 0.26.0 runs on one H200 (benchmarks/reference/h200-vllm-0.26.0 and servetune's
own H200 studies, benchmarks/reference/h200-servetune*: the points named in FIT_SET of
tuner/sim/reference.py); other GPUs reuse these factors (see docs/sim.md).
"""

from __future__ import annotations

import dataclasses

from tuner.sim.cost import Calibration
from tuner.sim.sglang_cost import SGLangTerms

# ---- issue 17, the prompt step's CPU time (benchmarks/sim_jitter_fit.py --v3 --refit --fp8-full, benchmarks/results/
# sim/sim_jitter_fit_v5.txt): e_lin and e_attn x 1.2 (the isolated probe's prefill speed), heat_slowdown 0.3 (the clock
# under sustained compute), a prompt step's CPU floor of 15 ms drawn per step (gamma, cv 1: prompt_cpu_step_s /
# prompt_cpu_step_cv), prompt_defer 0.15, chosen on a grid leave-one-shape-out (the all-shape choice; the 4B fold's
# is in SHAPE_LOSO); then o_step_s, ingress_per_seq_s and prompt_lead_max_s refitted on Qwen3-8B's loss
# (calibrate_sim.py's search over e_kv, o_step_s, o_tok_s, frontend_s, ingress_per_seq_s, prompt_lead_max_s), and the
# four FP8 gains re-chosen on that base by calibrate_fp8.py's grid and objective (were 1.55 / 2 / 1.3 / 1.1). Was e_lin
# 0.6, e_attn 0.53619, o_step_s 0.579708 ms, ingress_per_seq_s 80.97 us, prompt_lead_max_s 55.9 ms, heat_slowdown 0,
# prompt_defer 0.312477, no floor.
# ---- issue 17, the prompt step's launch holds the step before it (benchmarks/sim_hold_fit.py --refit --ingress, output
# benchmarks/results/sim/sim_hold_fit_ingress.txt; docs/sim.md "The launch holds the step before"): prompt_hold on in
# place of the floor and the deferral above (prompt_defer 0; prompt_cpu_step_s / _cv are now the launch's, not a
# floor's): the launch 14.1 ms + 0.575 ms per layer (the two H100 step traces: 34.8 ms on Qwen3-8B), cv 0.27 (the 8B
# trace's), prompt_launch_serial 0, ingress_rho_max 0.8, the API server's 5 ms per new request (ingress_s), chosen on a
# grid leave-one-shape-out (every fold but 4B's chose this key; 4B's is in SHAPE_LOSO); then o_step_s, o_tok_s,
# frontend_s and ingress_per_seq_s refitted on Qwen3-8B's loss (were 0.438343 ms, 8.26928 ns, 0.1 ms, 99.86 us).
# prompt_lead_max_s is inert with the hold (kept for the forms that use it).
# ---- issue 17, the hold sees a prompt that comes in during a prompt step's launch (benchmarks/sim_hold_fit.py --refit
# --window --measured --peek --serial 0, output benchmarks/results/sim/sim_hold_fit_peek_serial0.txt; docs/sim.md "A
# prompt in during a launch holds the first token"): sched_after_launch 2 (the engine core schedules step N+1 after
# launching step N and hands out N's tokens after launching N+1), the API server's time per new request as the isolated
# probe measured it (ingress_s 4.5 ms + ingress_tok_s 3 us per prompt token, was 5 ms + 0), prompt_launch_serial 0 in
# every fold; then e_kv, o_step_s, o_tok_s, frontend_s and ingress_per_seq_s refitted on Qwen3-8B's loss (were 0.8,
# 0.381168 ms, 9.50967 ns, 0.152087 ms, 86.83 us).
FITTED = Calibration(
    e_lin=0.72,
    e_w=1,
    e_attn=0.643428,
    e_kv=0.8284464610732978,
    o_step_s=0.00038116782608695656,
    o_tok_s=7.985336784985907e-09,
    launch_per_layer_s=6.31589e-05,
    eager_mult=1.0433,
    frontend_s=0.0001,
    ingress_per_seq_s=8.385052363579516e-05,
    heat_slowdown=0.3,
    heat_tau_s=2,
    prompt_defer=0.0,
    prompt_lead_max_s=0.0486102,
    sched_ahead=1,
    allreduce_lat_s=8e-06,
    e_link=0.7,
    fp8_lin_gain=1.5,
    fp8_attn_gain=1.3,
    fp8_kv_gain=1.4,
    fp8_w_gain=1.45,
    w_floor_layer_s=5e-05,
    prompt_cpu_step_s=0.0141,
    prompt_cpu_step_cv=0.27,
    prompt_cpu_layer_s=0.000575,
    ingress_rho_max=0.8,
    ingress_s=0.0045,
    ingress_tok_s=3e-06,
    prompt_hold=1,
    sched_after_launch=2,
)

# ---- five shapes (issue 17): e_w and w_floor_layer_s are chosen on a grid by benchmarks/sim_shape_gpu.py (form wfloor2)
# on all five measured Qwen3 shapes (8B: calibrate_sim.py's loss; 1.7B, 4B, 14B, 32B: their `vllm bench` figures); every
# other factor is the Qwen3-8B fit (was e_w=0.730297, no floor). SHAPE_LOSO holds each non-8B shape's values from the
# same grid with that shape left out: benchmarks/sim_fidelity.py simulates the shape split with them, so its shape
# errors never come from a fit that saw the shape.
# With issue 17's prompt-step terms every fold chose FITTED's key but Qwen3-4B's, which chose prompt_defer 0.312477
# and so its own refitted Qwen3-8B step terms; with the hold (above) the 4B fold started from those and chose
# prompt_launch_serial 0.5 and ingress_s 10 ms, its Qwen3-8B step terms refitted again; with the peek (above) every
# fold has the one key and the 4B fold's Qwen3-8B step terms were refitted from its own base: its entry carries them.
SHAPE_LOSO: dict[str, dict[str, float]] = {
    "qwen3-1.7b": {"e_w": 0.975, "w_floor_layer_s": 4.5e-05},
    "qwen3-4b": {"e_w": 1.0, "w_floor_layer_s": 5e-05, "e_kv": 0.857904, "o_step_s": 0.000621667575,
                 "o_tok_s": 9.509671999999998e-09, "frontend_s": 0.0001, "ingress_per_seq_s": 7.040982608695653e-05},
    "qwen3-14b": {"e_w": 1.0, "w_floor_layer_s": 5e-05},
    "qwen3-32b": {"e_w": 1.0, "w_floor_layer_s": 5e-05},
}

# ---- SGLang (issue 17): SGLang's own terms over FITTED (tuner/sim/sglang_cost.py), applied to SGLang engines only.
# Refitted (same script) on the five-shape base (e_w 1, w_floor_layer_s 50 us; was step_extra_s 2.537 ms, 0.713, 0.27).
# step_extra_s and triton_e_kv: fitted by benchmarks/calibrate_sglang.py on SGLang 0.5.17's decode-batch log lines
# (triton attention, BF16) of h200-sglang-dynamic trial 0 @6 and h200-joint-dynamic trial 1 @6 and @12 req/s;
# triton_e_attn (prefill attention): chosen by the same script on a grid, min mean |error| over tok/s, TTFT50/99,
# TPOT50/99 of the same three BF16 load points simulated end to end; fp8_lin_gain (SGLang's FP8 prefill GEMMs) the
# same way on the FP8 trial 3 @6 alone (leave-one-out). Held out: trial 1 @9 and trial 3 @12. fp8_w_gain (2.0: the
# halved weight bytes) and the triton FP8 KV / attention gains (1.0: the kernel dequantises to BF16) are priors, not
# fitted; overlap (SGLang's default overlap scheduler) is not fitted. The lead's SGLang rate sweep
# (benchmarks/reference/h200-sglang-0.5.17-sweep: pytorch sampling, no --enable-metrics) is held out: its log gives
# triton_e_kv 0.740 but step_extra_s 0.87 ms; the value here is that of servetune's own launches (docs/sim.md).
SGLANG_FIT_POINTS = (  # (results folder, trial, load): the SGLang study points fitted on; the others are held out
    ("benchmarks/results/h200/h200-sglang-dynamic", 0, 6.0),
    ("benchmarks/results/h200/h200-joint-dynamic", 1, 6.0),
    ("benchmarks/results/h200/h200-joint-dynamic", 1, 12.0),
    ("benchmarks/results/h200/h200-joint-dynamic", 3, 6.0),  # FP8 weights + KV: fp8_lin_gain only
)
# Issue 17's prompt-step refit (above) moved vLLM's linear-layer efficiency (0.6 -> 0.72) and per-step overhead (0.579708
# -> 0.438343 ms); these SGLang terms were fitted over the old values, so SGLang keeps them: e_lin 0.6 and step_extra_s
# 1.89221 + 0.141365 ms (the same total per-step overhead). SGLang runs no vLLM heat or prompt-step terms.
# The hold's refit (above) moved vLLM's o_step_s again (0.438343 -> 0.381168 ms) and its API-server terms; SGLang keeps
# its own: step_extra_s 2.03358 + 0.057175 ms (the same total per-step overhead), o_tok_s, frontend_s and
# ingress_per_seq_s as they were, and none of vLLM's new ingress terms (nor the peek's refit: step_extra_s below keeps
# the same total as o_step_s moved by under 1e-12 s; ingress_tok_s stays 0 for SGLang).
SGLANG_FITTED = SGLangTerms(
    step_extra_s=0.002090755,
    o_tok_s=8.26928e-09,
    frontend_s=0.0001,
    ingress_per_seq_s=9.98569e-05,
    e_lin=0.6,
    fp8_w_gain=2.0,
    triton_e_kv=0.709432,
    fp8_lin_gain=1.45,
    triton_e_attn=0.26,
    triton_fp8_kv_gain=1.0,
    triton_fp8_attn_gain=1.0,
)

# SGLang 0.5.17 on the H100 (issue 17, benchmarks/sglang_batch_probe.py, rule in its docstring, committed before the run):
# the triton decode step fitted on a batch probe (batches of 1-96 decoding with no prefill between the log's lines,
# benchmarks/reference/h100-sglang-0.5.17-batch-probe): triton_decode_s in place of step_extra_s on decode-only steps,
# triton_kv_seq_s x context per sequence, triton_e_kv. Prefill steps keep the H200 terms. Judged on the seven recorded
# phases of two H100 workload runs, none fitted on: median |error| P50 TPOT 29.2 -> 4.3 %, P99 TPOT 23.7 -> 2.3 %,
# worst phase 9.7 % (benchmarks/results/sim/sglang_batch_probe.txt).
SGLANG_FITTED_H100 = dataclasses.replace(
    SGLANG_FITTED,
    triton_decode_s=0.000332124,
    triton_kv_seq_s=1.42967e-07,
    triton_e_kv=0.81359,
)
SGLANG_BY_GPU = {"H100": SGLANG_FITTED_H100}


def sglang_terms_for(gpu: str) -> SGLangTerms:
    """SGLang's terms on `gpu` (the catalog's name): the card's own fit where there is one, else the H200's."""
    return SGLANG_BY_GPU.get(gpu, SGLANG_FITTED)
