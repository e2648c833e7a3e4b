"""The calibration's fields: fitted efficiencies and overheads of the step-time model (tuner/sim/cost.py).

A plain module of its own, never compiled (tuner/sim/native.py compiles cost.py): a frozen dataclass must
stay a normal Python class so that it pickles (multiprocessing in benchmarks/calibrate_sim.py) and behaves
the same with or without the compiled simulator. Imported everywhere as `tuner.sim.cost.Calibration`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


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
    # the API server as a shared CPU (0 = off): it is busy rho = ingress_per_seq_s x (sequences running) / (the last
    # step's length) of the time streaming tokens, so a new prompt's ingress stretches by 1 / (1 - rho), rho capped at
    # this value (a small model's short steps keep the API server busier: Qwen3-1.7B at 16 req/s, rho ~0.8); with
    # ingress_s / ingress_tok_s on, their FIFO service stretches by the same factor (the CPU streaming leaves over)
    ingress_rho_max: float = 0.0
    # the API server's CPU per streamed token (0 = off): tokens leave when one server has worked through every
    # step's tokens before them (tuner/sim/api_server.py); ~100 us measured (Qwen3-1.7B, 24 req/s: one full core)
    stream_tok_s: float = 0.0
    # with stream_tok_s on, the API server's CPU per SSE chunk (0 = off: every token is its own job): the server then
    # batches as vLLM's output handler does, one chunk per request for all the steps that arrived while it was busy
    # (tuner/sim/api_server.py, `api_rounds`); stream_tok_s is then the per-token share (detokenising, outputs)
    stream_chunk_s: float = 0.0
    # with stream_tok_s on, how many passes of the run solve for new requests queueing behind that streaming on the
    # same CPU (tuner/sim/api_server.py; 0 = they do not: ingress is its own FIFO); ~3 settle the ingress times
    api_passes: int = 0
    # FLOP-bound kernels slow down by this factor at sustained full compute (the GPU's clock under its power
    # limit), less in proportion to a moving average of the compute-bound share of time; 0 = never
    heat_slowdown: float = 0.0
    heat_tau_s: float = 2.0  # time constant of that moving average
    # vLLM: share of a prompt step's extra time that lands in the next step, with the prompt's first token
    # (measured in the H200 per-request token times; tuner/sim/vllm_sched.py); 0 = off
    prompt_defer: float = 0.0
    # vLLM: the most extra time (over the same step without prompt chunks) a prompt step's decodes wait for
    # before their tokens go out; the rest goes to the next step (0 = no limit, off). In the H200 records at
    # 8 req/s a step with two new prompts shows as two intervals of about one prompt each, not 1.3 + 0.7
    prompt_lead_max_s: float = 0.0
    # vLLM: with this set (s per prompt token, 0 = off), the lead is this x the prompt tokens the step carries in
    # place of prompt_lead_max_s: the CPU work of a step's new prompt tokens, not a share of its GPU time
    prompt_lead_tok_s: float = 0.0
    # vLLM: the most of a prompt step's extra time that goes to the next step (0 = no limit, off): at high load a
    # step with several new prompts keeps their work before the first tokens' interval (benchmarks/prompt_tail.py)
    prompt_defer_max_s: float = 0.0
    # vLLM async scheduling (1 = on): each step is scheduled when the one before it starts, so a request that
    # reaches the engine during a step is admitted a step later; 0 = at the next step
    sched_ahead: int = 0
    # vLLM: a step that carries new prompt tokens lasts at least the same step without them + this x those tokens
    # (s per prompt token, 0 = off): CPU work on a new prompt that a small model's GPU time does not cover (the
    # per-request timelines: decodes wait ~22 ms around an isolated 2048-token prompt on Qwen3-1.7B and -4B alike,
    # whose GPU prefill takes ~10 and ~20 ms; benchmarks/sim_shape_cpu.py)
    prompt_cpu_tok_s: float = 0.0
    # vLLM: with this set (s, 0 = off), that floor also has a fixed part per step that carries new prompt tokens,
    # however many prompts it holds: the engine core's CPU work of a step that takes in prompts (a burst of 8 new
    # prompts stalls a running decode by 9-27 ms, not 8 x 12; ttft_breakdown.py --burst)
    prompt_cpu_step_s: float = 0.0
    # vLLM: the coefficient of variation of a prompt step's fixed CPU time, `prompt_cpu_step_s` and `admit_step_s`
    # (0 = every prompt step the same): each is drawn per step from a gamma distribution of that mean and spread, from a
    # generator seeded per run (the same sends give the same records). The engine core's CPU time for a new prompt is
    # not a constant: on an idle Qwen3-1.7B a 2048-token prompt's engine time is 16-18 or 27-31 ms run to run
    # (ttft_breakdown.py), and a deterministic floor puts every prompt step at one length, so P99 ITL jumps between one
    # mode and the next
    prompt_cpu_step_cv: float = 0.0
    # vLLM (1 = on, 0 = off): the engine core's launch of a prompt step holds the decodes' tokens. vLLM 0.26 schedules
    # and launches step N+1 before it hands out step N's tokens (async scheduling), and launching a step with prompt
    # chunks costs ~35 ms of CPU whatever its prompt tokens (an engine-core step trace on an H100, Qwen3-8B at 6 req/s:
    # 34.8 ms mean, cv 0.27, for 2048-8192 prompt tokens; 2 ms for a decode step; benchmarks/step_trace.py). Modelled
    # per prompt step: its decodes' tokens go out after max(that CPU time, drawn per step from prompt_cpu_step_s /
    # prompt_cpu_step_cv; their decode step + the work carried from the step before), the rest of its GPU work goes to
    # the next step, and its prompts' first tokens with the next step's. In place of prompt_defer, the floor and the
    # admission terms
    prompt_lead_cpu: int = 0
    # vLLM: a part of that per-step CPU time that grows with the model's layers (s per layer, 0 = off): the mean is
    # prompt_cpu_step_s + layers x this. A step with more prompt tokens than the largest CUDA graph runs eagerly, so
    # its launch issues every layer's kernels from Python: the step traces give 34.8 ms on Qwen3-8B (36 layers) and
    # 30.2 ms on Qwen3-1.7B (28), i.e. ~14 ms + ~0.58 ms per layer on that host (benchmarks/step_trace.py)
    prompt_cpu_layer_s: float = 0.0
    # vLLM, with prompt_lead_cpu: the share of that launch that passes before the GPU can start the step's work (0 =
    # the GPU runs each kernel as it is launched, so the launch and the GPU work overlap; 1 = the GPU waits for the
    # whole launch). The step before's GPU work, carried in, overlaps the launch either way
    prompt_launch_serial: float = 0.0
    # vLLM (1 = on, 0 = off): the launch of a prompt step holds the tokens of the step *before* it, and the prompts'
    # first tokens leave at the prompt step's own end (the 4B step trace, docs/sim.md). With async scheduling the engine
    # core launches step N+1 while the GPU runs step N and hands out N's tokens only after that launch; a prompt step's
    # launch (drawn per step from prompt_cpu_step_s / prompt_cpu_step_cv) runs 20-35 ms, a decode step's 2 ms. So the
    # step before a prompt step hands out at max(its GPU end, its start + the launch); the GPU runs on (the prompt
    # step's kernels run as they are launched: prompt_launch_serial of the launch first), so the prompt step's own
    # interval is its GPU time less the part hidden under the launch. In place of prompt_defer, the floor, the lead
    # and the admission terms
    prompt_hold: int = 0
    # vLLM with prompt_hold (1 = on, 0 = off): the engine core schedules step N+1 once it is done launching step N, so a
    # request that reaches it before the end of step N's launch (a prompt step's: 20-35 ms after the step starts) is in
    # step N+1, not N+2 (off: the window closes when step N starts, as for a decode step, whose launch is short);
    # 2: and step N's tokens wait for the launch of such a request's prompt (N's are handed out after N+1's launch)
    sched_after_launch: int = 0
    # KV reads slow with the query heads each KV head serves (GQA group g = heads / kv_heads): the KV-read time is
    # x (g / KV_GROUP_REF) ** this (0 = off). A decode attention kernel works one KV head's blocks for its g query
    # heads at a time, so more query rows per byte read keep it further from the bandwidth roofline. e_kv is fitted on
    # Qwen3-8B (g = 4), which this leaves unchanged (benchmarks/sim_kv_group.py)
    kv_group_exp: float = 0.0
    # vLLM speculative decoding, any drafter: a fixed time per verify step (rejection sampling, the drafts' bookkeeping)
    # beyond the target's k+1-token step and the drafter's own cost (0 = off). Real n-gram runs at the engine's own
    # acceptance read the verify steps ~25 % longer than those terms alike with the CPU drafter (async scheduling off)
    # and the GPU one (async on): the same P50 TPOT on one H100 (benchmarks/sim_spec_check.py, docs/sim.md)
    spec_step_s: float = 0.0
    # decode-only steps: extra seconds per token of context per decoding sequence (the batch's mean; 0 = off). SGLang's
    # triton decode kernel splits each sequence's KV into a fixed number of parts, so a batch of long sequences waits
    # on long serial splits whatever the bandwidth left over (tuner/sim/sglang_cost.py; vLLM: 0)
    kv_seq_s: float = 0.0
    # decode-only steps: seconds added to o_step_s (with kv_seq_s, SGLang triton's decode form in place of its
    # all-step constant; vLLM: 0)
    dec_step_extra_s: float = 0.0
    jitter_seed: int = 0  # which draw of those (not fitted: benchmarks check that a choice holds on other draws)
    # the API server's time for one request before the engine sees it (HTTP, tokenising, the hop to the engine
    # core): fixed + per prompt token (0 = off), served one request at a time in send order. Measured on the H200,
    # idle, one request at a time: client TTFT less the engine's queue and prefill times is ~4.5 ms + ~3 us per
    # prompt token on every shape (benchmarks/ttft_breakdown.py; it also holds the first token's way back); in a
    # burst of 8 the median request's share grows to 14-28 ms (--burst): the requests queue for it
    ingress_s: float = 0.0
    ingress_tok_s: float = 0.0
    # the coefficient of variation of that time per request (0 = every request the same): each request's is drawn
    # from a gamma distribution of that mean and spread, seeded per run (jitter_seed). Two servers fed the same sends
    # read a request's TTFT ~10 ms apart at 2-5 req/s and 23-32 ms apart at 8-20 req/s (Qwen3-4B on the H200, median
    # |difference|; benchmarks/engine_noise.py): the engine's own noise, which a fixed ingress leaves out (on an H100
    # host measured later only 1.7-7 ms: the noise is the host's, and the shipped calibration keeps this 0)
    ingress_cv: float = 0.0
    # vLLM: the engine core's CPU work for each request it admits (0 = off): it runs while the GPU works on the step
    # before (async scheduling), so a step that admits k new requests ends k x this - (the step before's length)
    # later, when positive (after an idle engine: k x this). Measured on the H200 with one decode running: a new
    # 16-token prompt stalls it by ~10, 9, 7 and 0.7 ms on Qwen3-1.7B, -4B, -8B, -32B (steps of 2, 3.6, 5.2, 19 ms):
    # ~12 ms less the step; a 2048-token prompt by that plus its prefill
    admit_cpu_s: float = 0.0
    # vLLM: the same, once per step that admits any new request (0 = off); the two add. A burst of 8 new 16-token
    # prompts stalls a running decode by ~9-27 ms on 1.7B-14B, not 8 x 12 (ttft_breakdown.py --burst): per step
    admit_step_s: float = 0.0
    allreduce_lat_s: float = 8e-6  # per all-reduce latency (TP > 1)
    e_link: float = 0.7  # interconnect efficiency
    # FP8 (levers): effective speed-up over BF16 of the linear layers with FP8 weights and of attention
    # with an FP8 KV cache, where the GPU has FP8 tensor cores (1 = no gain beyond the halved bytes)
    # (fitted by benchmarks/calibrate_fp8.py on the H200 FP8 points; 2.0 would be the datasheet ratio)
    fp8_lin_gain: float = 1.35
    fp8_attn_gain: float = 1.0
    fp8_kv_gain: float = 1.4  # effective KV-read speed-up with an FP8 cache (2 = the halved bytes exactly)
    # effective weight-read speed-up of the FP8 linear layers (2 = the halved bytes exactly; below 2 where the
    # small-batch FP8 GEMMs and their activation quantisation do not reach the bandwidth the bytes allow)
    fp8_w_gain: float = 2.0
    # a fixed time per layer in the weight-read term (0 = off): a decode GEMM reading s weight bytes at a bandwidth
    # efficiency s / (s + s0) takes s / bw + s0 / bw, a floor that does not shrink with the model (issue 17's five
    # shapes, benchmarks/sim_shape_gpu.py); FLOP-bound (prefill) steps do not see it
    w_floor_layer_s: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return asdict(self)
