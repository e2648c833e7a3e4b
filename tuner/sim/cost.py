"""Roofline step-time model: how long one engine step takes for a given batch on a given GPU.

Per step, two kernel families are each bound by compute or memory, whichever is slower:
  - the linear layers (QKV/O/MLP/lm_head): FLOPs = 2 x active params x tokens, bytes = the weights
    read once per step (for MoE, only the experts the batch touches);
  - attention: FLOPs = 4 x layers x heads x head_dim x (query, key) pairs, bytes = the KV the
    batch reads (prefill chunks see their context; decodes read their whole KV).
Each rate is the GPU's peak times a fitted efficiency. Added: per-step overhead (scheduler,
sampling, input preparation), a kernel-launch term when the batch runs outside CUDA graphs, a
slowdown factor without torch.compile (vLLM `enforce_eager`), and for tensor parallelism two
all-reduces per layer. The efficiencies and overheads are fitted by benchmarks/calibrate_sim.py.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from tuner.sim.catalog import GPU, ModelShape


@dataclass(frozen=True, slots=True)
class Calibration:
    e_lin: float  # linear-layer FLOP efficiency (share of peak)
    e_w: float  # weight-read bandwidth efficiency
    e_attn: float  # attention FLOP efficiency
    e_kv: float  # KV-read bandwidth efficiency
    o_step_s: float  # fixed per-step overhead, graphs on
    o_tok_s: float  # per batched token overhead (input prep, sampling)
    launch_per_layer_s: float  # extra per layer when a step runs outside CUDA graphs
    eager_mult: float  # compute slowdown without torch.compile / graphs (enforce_eager)
    frontend_s: float  # API server latency added to every streamed token
    # extra wait of a new request before the engine sees it, per sequence running when it is sent (the API
    # server streams every running sequence's tokens before it reads, tokenizes and hands on a new prompt)
    ingress_per_seq_s: float = 0.0
    # FLOP-bound kernels slow down by this factor at sustained full compute (the GPU's clock under its power
    # limit), less in proportion to a moving average of the compute-bound share of time; 0 = never
    heat_slowdown: float = 0.0
    heat_tau_s: float = 2.0  # time constant of that moving average
    allreduce_lat_s: float = 8e-6  # per all-reduce latency (TP > 1)
    e_link: float = 0.7  # interconnect efficiency

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


class StepCost:
    """Precomputed per-unit costs so a step's time is a handful of multiplications."""

    def __init__(self, shape: ModelShape, gpu: GPU, cal: Calibration, tp: int, dtype_bytes: int,
                 eager: bool = False) -> None:
        peak = gpu.bf16_tflops * 1e12
        bw = gpu.hbm_tb_s * 1e12
        self.c_lin = 2.0 * shape.active_params_per_token / tp / (peak * cal.e_lin)
        self.c_lm = 2.0 * shape.hidden * shape.vocab / tp / (peak * cal.e_lin)
        moe_bytes = 0.0
        dense = shape.total_params
        if shape.experts:
            moe_bytes = shape.experts * shape.mlp_params_per_expert * dtype_bytes / tp
            dense = shape.total_params - shape.experts * shape.mlp_params_per_expert
        if not shape.tied_embeddings:
            dense -= shape.vocab * shape.hidden  # the input embedding is gathered, not read whole
        self.t_dense_w = dense * dtype_bytes / tp / (bw * cal.e_w)
        self.t_moe_w = moe_bytes / (bw * cal.e_w)
        self.moe_keep = (1.0 - shape.experts_per_token / shape.experts) if shape.experts else 0.0
        self.c_attn = 4.0 * shape.layers * shape.heads * shape.head_dim / tp / (peak * cal.e_attn)
        self.c_kv = shape.kv_bytes_per_token(dtype_bytes) / tp / (bw * cal.e_kv)
        self.o_step = cal.o_step_s
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

    def weights_time(self, tokens: int) -> float:
        if self.t_moe_w:
            return self.t_dense_w + self.t_moe_w * (1.0 - self.moe_keep ** tokens)
        return self.t_dense_w

    def step(self, tokens: int, logits: int, attn_pairs: float, kv_read: float, graphed: bool,
             flop_mult: float = 1.0) -> float:
        """Seconds for one step of `tokens` batched tokens sampling `logits` of them (FLOP terms x flop_mult)."""
        lin = max((tokens * self.c_lin + logits * self.c_lm) * flop_mult, self.weights_time(tokens))
        attn = max(attn_pairs * self.c_attn * flop_mult, kv_read * self.c_kv)
        t = (lin + attn) * self.mult + self.o_step + tokens * self.o_tok
        if not graphed:
            t += self.launch
        if self.tp_tok:
            t += self.tp_lat + tokens * self.tp_tok
        return t

    def flop_time(self, tokens: int, logits: int, attn_pairs: float) -> float:
        """The FLOP-bound part of a step at full clock (what heats the GPU)."""
        return ((tokens * self.c_lin + logits * self.c_lm) + attn_pairs * self.c_attn) * self.mult

    def decode_base(self, n: int, graphed: bool, flop_mult: float = 1.0) -> float:
        """The context-independent part of a decode-only step of n sequences."""
        lin = max(n * (self.c_lin + self.c_lm) * flop_mult, self.weights_time(n))
        t = lin * self.mult + self.o_step + n * self.o_tok
        if not graphed:
            t += self.launch
        if self.tp_tok:
            t += self.tp_lat + n * self.tp_tok
        return t
