"""Roofline step-time model: how long one engine step takes for a given batch on a given GPU.

Per step, two kernel families are each bound by compute or memory, whichever is slower:
  - the linear layers (QKV/O/MLP/lm_head): FLOPs = 2 x active params x tokens, bytes = the weights
    read once per step (for MoE, only the experts the batch touches);
  - attention: FLOPs = 4 x layers x heads x head_dim x (query, key) pairs, bytes = the KV the
    batch reads (prefill chunks see their context; decodes read their whole KV).
Each rate is the GPU's peak times a fitted efficiency; the weights' read also has a fixed time per layer
(`w_floor_layer_s`: a per-GEMM bandwidth efficiency s / (s + s0), the floor that small models hit). Added: per-step overhead (scheduler,
sampling, input preparation), a kernel-launch term when the batch runs outside CUDA graphs, a
slowdown factor without torch.compile (vLLM `enforce_eager`), and for tensor parallelism two
all-reduces per layer. The efficiencies and overheads are fitted by benchmarks/calibrate_sim.py.

Levers (docs/sim.md): FP8 weights halve the linear layers' weight bytes and run them at the GPU's FP8
peak (embedding and lm_head stay in the checkpoint dtype); an FP8 KV cache halves the KV bytes read
per context token and runs attention at the FP8 peak (FlashAttention-3's FP8 path). Speculative
decoding (tuner/sim/spec.py) widens every decode to k+1 verify tokens, adds the draft's cost, and
yields tau tokens per verify step: decode-only steps are modelled as tau-th parts of a verify step.
"""

from __future__ import annotations

from typing import Any

from tuner.sim.catalog import GPU, ModelShape
from tuner.sim.fit import Calibration
from tuner.sim.spec import DRAFT_NGRAM_S, DRAFT_PASS_S, DRAFT_VOCAB_EAGLE3, SpecPlan, at_k

__all__ = ["Calibration", "StepCost"]  # Calibration lives in tuner.sim.fit (kept importable from here)

KV_GROUP_REF = 4.0  # Calibration.kv_group_exp's reference group: Qwen3-8B's 32 / 8 heads, which e_kv is fitted on


class StepCost:
    """Precomputed per-unit costs so a step's time is a handful of multiplications."""

    def __init__(self, shape: ModelShape, gpu: GPU, cal: Calibration, tp: int, dtype_bytes: int,
                 eager: bool = False, *, fp8_weights: bool = False, fp8_kv: bool = False,
                 spec: SpecPlan | None = None, graph_max: int = 0,
                 methods: dict[str, dict[str, Any]] | None = None) -> None:
        peak = gpu.bf16_tflops * 1e12
        bw = gpu.hbm_tb_s * 1e12
        # FP8 weights: linear layers at the FP8 peak where the GPU has one (weight-only FP8 elsewhere)
        has_fp8 = gpu.fp8_tflops > 0
        lin_peak = peak * min(cal.fp8_lin_gain, gpu.fp8_tflops * 1e12 / peak) if fp8_weights and has_fp8 else peak
        attn_peak = peak * min(cal.fp8_attn_gain, gpu.fp8_tflops * 1e12 / peak) if fp8_kv and has_fp8 else peak
        w_bytes = dtype_bytes / cal.fp8_w_gain if fp8_weights else dtype_bytes  # 2 / 2.0: 1 byte, exactly
        self.c_lin = 2.0 * shape.active_params_per_token / tp / (lin_peak * cal.e_lin)
        self.c_lm = 2.0 * shape.hidden * shape.vocab / tp / (peak * cal.e_lin)
        moe_bytes = 0.0
        dense = shape.total_params
        if shape.experts:
            moe_bytes = shape.experts * shape.mlp_params_per_expert * w_bytes / tp
            dense = shape.total_params - shape.experts * shape.mlp_params_per_expert
        if not shape.tied_embeddings:
            dense -= shape.vocab * shape.hidden  # the input embedding is gathered, not read whole
        lin_dense = shape.attn_params + (0 if shape.experts else shape.mlp_params_per_expert)
        dense_bytes = dense * dtype_bytes - lin_dense * (dtype_bytes - w_bytes)
        self.t_dense_w = dense_bytes / tp / (bw * cal.e_w) + shape.layers * cal.w_floor_layer_s
        self.t_moe_w = moe_bytes / (bw * cal.e_w)
        self.moe_keep = (1.0 - shape.experts_per_token / shape.experts) if shape.experts else 0.0
        self.c_attn = 4.0 * shape.layers * shape.heads * shape.head_dim / tp / (attn_peak * cal.e_attn)
        self.c_kv = shape.kv_bytes_per_token(dtype_bytes) / tp / (bw * cal.e_kv)
        if fp8_kv:
            self.c_kv /= cal.fp8_kv_gain
        if cal.kv_group_exp:
            self.c_kv *= (shape.heads / shape.kv_heads / KV_GROUP_REF) ** cal.kv_group_exp
        self.o_step = cal.o_step_s
        self.o_dec = cal.o_step_s + cal.dec_step_extra_s  # a decode-only step's fixed time
        self.o_tok = cal.o_tok_s
        self.launch = cal.launch_per_layer_s * shape.layers
        self.mult = cal.eager_mult if eager else 1.0
        if tp > 1:
            ring = 2.0 * (tp - 1) / tp / (gpu.link_gb_s * 1e9 * cal.e_link)
            self.tp_tok = 2 * shape.layers * shape.hidden * dtype_bytes * ring
            self.tp_lat = 2 * shape.layers * cal.allreduce_lat_s
        else:
            self.tp_tok = self.tp_lat = 0.0
        # decode-only steps: time = dec_a(n) + dec_b * total context (linear in context)
        self.dec_b = max(self.c_attn, self.c_kv) * self.mult
        self.kv_seq = cal.kv_seq_s  # + this x context per sequence (decode-only steps; Calibration.kv_seq_s)
        self.spec = spec
        self.tau = 1.0  # tokens per decode step and sequence
        self.width = 1  # tokens each decode feeds the model per step
        self._by_n: tuple[StepCost, ...] | None = None  # per-batch-size K: the fixed-K cost per batch size
        if spec is not None:
            self._init_spec(shape, cal, tp, dtype_bytes, peak, bw, spec, graph_max)
            if spec.schedule is not None:
                def fixed(k: int) -> StepCost:
                    return StepCost(shape, gpu, cal, tp, dtype_bytes, eager, fp8_weights=fp8_weights,
                                    fp8_kv=fp8_kv, spec=at_k(spec, k, methods) if k else None, graph_max=graph_max)

                per_k = {k: fixed(k) for k in set(spec.schedule[1:])}
                self._by_n = tuple(per_k[k] if n else self for n, k in enumerate(spec.schedule))

    @property
    def scheduled(self) -> bool:
        """Speculative decoding with a per-batch-size K: the spec terms depend on the running batch."""
        return self._by_n is not None

    def for_n(self, n: int) -> StepCost:
        """The cost of a step with n decoding sequences: itself, or under a per-batch-size K schedule the
        fixed-K cost at K(n) (batch sizes past the schedule keep its last K)."""
        by_n = self._by_n
        if by_n is None or n <= 0:
            return self
        return by_n[n] if n < len(by_n) else by_n[-1]

    def _init_spec(self, shape: ModelShape, cal: Calibration, tp: int, nbytes: int, peak: float, bw: float,
                   spec: SpecPlan, graph_max: int) -> None:
        """Per-verify-step draft coefficients (draft weights in the checkpoint dtype, split by TP)."""
        self.tau, self.width, self.graph_max = spec.tau, spec.width, graph_max
        lay = spec.draft_layers * shape.layer_params
        vocab = DRAFT_VOCAB_EAGLE3 if spec.method == "eagle3" else shape.vocab
        head = shape.hidden * vocab
        lin_c = 2.0 / tp / (peak * cal.e_lin)
        w_t = nbytes / tp / (bw * cal.e_w)
        ctx = spec.draft_layers / shape.layers  # draft KV per context token, relative to the target's
        floor = spec.draft_layers * cal.w_floor_layer_s  # the weight-read floor of the draft's layers, per pass
        self.d_step = cal.spec_step_s  # vLLM's fixed cost of a verify step (SGLang: 0, tuner/sim/sglang_cost.py)
        if spec.method == "ngram":
            self.d_fixed, self.d_seq, self.d_ctx = 0.0, DRAFT_NGRAM_S, 0.0
        elif spec.method == "ngram_gpu":  # one lookup kernel over the batch, on the GPU
            self.d_fixed, self.d_seq, self.d_ctx = DRAFT_PASS_S, 0.0, 0.0
        elif spec.method == "dflash":  # one pass: layers over the k+1 block, target lm_head over k drafts
            self.d_fixed = (lay + head) * w_t + floor + DRAFT_PASS_S
            self.d_seq = (lay * spec.width + head * spec.k) * lin_c
            self.d_ctx = max(self.c_attn * spec.width, self.c_kv) * ctx
        else:  # eagle3 / mtp: k autoregressive one-token passes
            p = spec.passes
            self.d_fixed = p * ((lay + head) * w_t + floor + DRAFT_PASS_S)
            self.d_seq = p * (lay + head) * lin_c
            self.d_ctx = p * max(self.c_attn, self.c_kv) * ctx
        # decode-only steps as tau-th parts of a verify step: k+1 queries per context token (KV read
        # once) plus the draft's own KV
        self.dec_b = (max(self.c_attn * spec.width, self.c_kv) * self.mult + self.d_ctx) / spec.tau

    def spec_draft_time(self, n: int, ctx: float) -> float:
        """Drafting for n sequences with `ctx` context tokens in all (weights read once per pass)."""
        if n <= 0:
            return 0.0
        return self.d_step + max(self.d_fixed, n * self.d_seq) + ctx * self.d_ctx

    def weights_time(self, tokens: int) -> float:
        if self.t_moe_w:
            return self.t_dense_w + self.t_moe_w * (1.0 - self.moe_keep ** tokens)
        return self.t_dense_w

    def step(self, tokens: int, logits: int, attn_pairs: float, kv_read: float, graphed: bool,
             flop_mult: float = 1.0, decodes: int = 0, decode_ctx: float = 0.0) -> float:
        """Seconds for one step of `tokens` batched tokens sampling `logits` of them (FLOP terms x flop_mult).

        `decodes` of the tokens are decoding sequences with `decode_ctx` context tokens in all: with
        speculative decoding each of them verifies k more tokens and is drafted for."""
        if self._by_n is not None and decodes:
            return self.for_n(decodes)._step(tokens, logits, attn_pairs, kv_read, graphed, flop_mult, decodes, decode_ctx)
        return self._step(tokens, logits, attn_pairs, kv_read, graphed, flop_mult, decodes, decode_ctx)

    def _step(self, tokens: int, logits: int, attn_pairs: float, kv_read: float, graphed: bool,
              flop_mult: float, decodes: int, decode_ctx: float) -> float:
        draft = 0.0
        if self.spec is not None and decodes:
            extra = decodes * self.spec.k
            tokens += extra
            logits += extra
            attn_pairs += self.spec.k * decode_ctx
            graphed = graphed and tokens <= self.graph_max
            draft = self.spec_draft_time(decodes, decode_ctx)
        # max(compute, bytes) of both kernel families, written out (this runs once or twice per step)
        lin = (tokens * self.c_lin + logits * self.c_lm) * flop_mult
        w = self.weights_time(tokens) if self.t_moe_w else self.t_dense_w
        if w > lin:
            lin = w
        attn = attn_pairs * self.c_attn * flop_mult
        kv = kv_read * self.c_kv
        if kv > attn:
            attn = kv
        t = (lin + attn) * self.mult + self.o_step + tokens * self.o_tok + draft
        if not graphed:
            t += self.launch
        if self.tp_tok:
            t += self.tp_lat + tokens * self.tp_tok
        return t

    def flop_time(self, tokens: int, logits: int, attn_pairs: float) -> float:
        """The FLOP-bound part of a step at full clock (what heats the GPU)."""
        return ((tokens * self.c_lin + logits * self.c_lm) + attn_pairs * self.c_attn) * self.mult

    def dec_b_at(self, n: int) -> float:
        """Seconds per context token of a decode-only step of n sequences (kv_seq: per token per sequence)."""
        return self.dec_b + self.kv_seq / n if self.kv_seq and n > 0 else self.dec_b

    def decode_base(self, n: int, graphed: bool, flop_mult: float = 1.0) -> float:
        """The context-independent part of a decode-only step of n sequences (with speculative
        decoding: a tau-th of a verify step, so one step still yields one token per sequence)."""
        if self._by_n is not None:
            return self.for_n(n)._decode_base(n, graphed, flop_mult)
        return self._decode_base(n, graphed, flop_mult)

    def _decode_base(self, n: int, graphed: bool, flop_mult: float) -> float:
        if self.spec is not None:
            w = n * self.width
            lin = max(w * (self.c_lin + self.c_lm) * flop_mult, self.weights_time(w))
            t = lin * self.mult + self.o_dec + w * self.o_tok + self.spec_draft_time(n, 0.0)
            if w > self.graph_max:
                t += self.launch
            if self.tp_tok:
                t += self.tp_lat + w * self.tp_tok
            return t / self.tau
        lin = max(n * (self.c_lin + self.c_lm) * flop_mult, self.weights_time(n))
        t = lin * self.mult + self.o_dec + n * self.o_tok
        if not graphed:
            t += self.launch
        if self.tp_tok:
            t += self.tp_lat + n * self.tp_tok
        return t
