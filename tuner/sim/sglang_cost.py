"""SGLang's own step-cost terms, over the vLLM-fitted calibration (issue 17).

The base calibration (tuner/sim/calibration.py FITTED) is fitted on vLLM 0.26.0, whose decode steps on the
H200 cost the weight read plus about 0.6 ms. SGLang 0.5.17's decode steps, measured from its own decode-batch
log lines (benchmarks/calibrate_sglang.py), cost several milliseconds more at every batch size, and with
`--attention-backend triton` (what the H200 runs used: FlashAttention-3 is not carried) the decode kernel reads
context more slowly and gains nothing from an FP8 KV cache (the triton kernels dequantise FP8 to BF16 inside the
kernel and are not bandwidth-bound). FP8 weights in SGLang halve the weight bytes (its FP8 GEMMs at small batch),
where vLLM's fitted weight-read gain is 1.1. So an SGLang engine runs on the base calibration with these terms
applied; vLLM engines never see them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from tuner.sim.fit import Calibration


@dataclass(frozen=True, slots=True)
class SGLangTerms:
    """What SGLang changes in the step cost (each field says what fitted it in tuner/sim/calibration.py)."""

    step_extra_s: float  # added to every step's fixed overhead (all attention backends)
    fp8_w_gain: float  # weight-read speed-up of FP8 linear layers (2 = the halved bytes exactly)
    triton_e_kv: float  # KV-read efficiency of the triton decode attention kernel
    fp8_lin_gain: float | None = None  # FLOP speed-up of FP8 linear layers (prefill); None: the base's (vLLM's)
    e_lin: float | None = None  # FLOP efficiency of the linear layers (prefill); None: the base's (vLLM's)
    triton_e_attn: float | None = None  # FLOP efficiency of triton's prefill (extend) attention (None: the base's)
    # triton: extra time of a decode-only step per token of context per sequence (Calibration.kv_seq_s; 0 = off)
    triton_kv_seq_s: float = 0.0
    # triton: a decode-only step's fixed extra time in place of step_extra_s (None: step_extra_s). With
    # triton_kv_seq_s it is the W form of benchmarks/sglang_workload_host.py (the H100's: sglang_batch_probe.py);
    # prefill (extend) steps keep step_extra_s, with which the prefill terms were fitted
    triton_decode_s: float | None = None
    triton_fp8_kv_gain: float = 1.0  # triton: KV reads from an FP8 cache cost as BF16's
    triton_fp8_attn_gain: float = 1.0  # triton: no FP8 tensor-core attention
    # the overlap scheduler (SGLang's default): the next step is scheduled while this one runs, so a request that
    # reaches the scheduler during a step joins a batch one step later (as vLLM's async scheduling); 0 = off
    overlap: int = 1
    # the API-server terms SGLang was fitted with (None: the base's): vLLM's refits of its own API server (issue 17's
    # hold) are not SGLang's tokenizer manager
    o_tok_s: float | None = None
    frontend_s: float | None = None
    ingress_per_seq_s: float | None = None
    ingress_s: float = 0.0  # the API server's own time per new request, one at a time (vLLM's: not fitted here)
    ingress_tok_s: float = 0.0  # and per prompt token (vLLM's isolated probe: not measured on SGLang)
    ingress_rho_max: float = 0.0


def sglang_calibration(cal: Calibration, terms: SGLangTerms | None, attention_backend: str | None) -> Calibration:
    """The calibration an SGLang engine runs on: `cal` with `terms` applied (None: `cal` unchanged)."""
    if terms is None:
        return cal
    cal = dataclasses.replace(cal, o_step_s=cal.o_step_s + terms.step_extra_s, fp8_w_gain=terms.fp8_w_gain,
                              ingress_s=terms.ingress_s, ingress_tok_s=terms.ingress_tok_s,
                              ingress_rho_max=terms.ingress_rho_max,
                              spec_step_s=0.0)  # vLLM's verify-step cost: SGLang's speculation is not measured
    for name in ("o_tok_s", "frontend_s", "ingress_per_seq_s"):
        value = getattr(terms, name)
        if value is not None:
            cal = dataclasses.replace(cal, **{name: value})
    if terms.fp8_lin_gain is not None:
        cal = dataclasses.replace(cal, fp8_lin_gain=terms.fp8_lin_gain)
    if terms.e_lin is not None:
        cal = dataclasses.replace(cal, e_lin=terms.e_lin)
    if attention_backend == "triton":
        dec_extra = 0.0 if terms.triton_decode_s is None else terms.triton_decode_s - terms.step_extra_s
        cal = dataclasses.replace(cal, e_kv=terms.triton_e_kv, kv_seq_s=terms.triton_kv_seq_s,
                                  dec_step_extra_s=dec_extra,
                                  fp8_kv_gain=terms.triton_fp8_kv_gain,
                                  fp8_attn_gain=terms.triton_fp8_attn_gain)
        if terms.triton_e_attn is not None:
            cal = dataclasses.replace(cal, e_attn=terms.triton_e_attn)
    return cal
