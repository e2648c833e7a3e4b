"""Memory model and start-time checks: does this config start, and how many tokens fit in the KV cache.

vLLM 0.26 (from the reference logs): KV bytes = gpu_memory_utilization x total - weights - peak
activation - non-torch memory; CUDA graphs are captured after the KV cache is allocated, so they
must fit in what is left. SGLang: mem_fraction_static x total holds weights and the KV pool; the
rest must hold activations and CUDA graphs. Failures raise EngineStartError with a one-line reason
worded like the engine's own message, so a launcher classifies the sim like the real thing: every
memory shortfall (including a KV cache too small for max_model_len) is "oom", as tuner.engines
classifies the real messages; invalid settings are "start_failed".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tuner.common.errors import EngineStartError
from tuner.sim.catalog import GPU, ModelShape
from tuner.trial.outcome import TrialOutcome

GIB = float(1 << 30)
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "auto": 2, "fp8": 1, "float32": 4}
NON_TORCH_GIB = 0.22  # NCCL/cuBLAS workspaces, read from the vLLM logs on H200
FREE_AT_START_GIB = 0.51  # used by the driver/context before the engine allocates (139.29 of 139.8)
VLLM_BLOCK_SIZES = (1, 8, 16, 32, 64, 128)


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    weights_gib: float
    activation_gib: float
    cuda_graph_gib: float
    kv_gib: float
    kv_tokens: int  # whole blocks/pages only
    kv_bytes_per_token: int  # per GPU (TP shards the KV heads)


def dtype_bytes(dtype: str) -> int:
    if dtype not in DTYPE_BYTES:
        raise EngineStartError(TrialOutcome.START_FAILED, f"ValueError: Unknown dtype: {dtype!r}")
    return DTYPE_BYTES[dtype]


def activation_gib(shape: ModelShape, tokens: int, tp: int) -> float:
    """Peak activation of a profiling run over `tokens` tokens (fit: 1.0 GiB at 8k, 1.6 GiB at 16k, Qwen3-8B)."""
    return 0.45 + tokens * shape.intermediate / tp * 6 / GIB


def cuda_graph_gib(shape: ModelShape, max_bs: int) -> float:
    """Graph pools grow with the largest captured batch (1.0 GiB at 512, 0.23 GiB at 128 for Qwen3-8B)."""
    return max_bs * shape.hidden * shape.layers * 14.2 / GIB


def check_common(shape: ModelShape, max_model_len: int, tp: int) -> None:
    if max_model_len <= 0:
        raise EngineStartError(TrialOutcome.START_FAILED, f"ValueError: max_model_len must be positive, got {max_model_len}")
    if max_model_len > shape.max_position:
        raise EngineStartError(
            TrialOutcome.START_FAILED,
            f"ValueError: User-specified max_model_len ({max_model_len}) is greater than the derived "
            f"max_model_len (max_position_embeddings={shape.max_position} in model's config.json).",
        )
    if tp <= 0 or shape.heads % tp:
        raise EngineStartError(
            TrialOutcome.START_FAILED,
            f"ValueError: Total number of attention heads ({shape.heads}) must be divisible by "
            f"tensor parallel size ({tp}).",
        )


def _weights(shape: ModelShape, tp: int, nbytes: int, fp8_weights: bool = False, draft_layers: int = 0) -> float:
    """Weights per rank: FP8 converts the decoder layers' linear projections only (1 byte each); a
    draft model adds `draft_layers` layers at the target's width in the checkpoint dtype."""
    total = shape.total_params * nbytes
    if fp8_weights:
        total -= shape.linear_params * (nbytes - 1)
    total += draft_layers * shape.layer_params * nbytes
    return total / tp / GIB


def _kv_per_token(shape: ModelShape, tp: int, nbytes: int, fp8_kv: bool, draft_layers: int) -> int:
    """KV bytes per token per rank: 1 byte per element with an FP8 cache; draft layers keep their own KV."""
    per = shape.kv_bytes_per_token(1 if fp8_kv else nbytes) * (shape.layers + draft_layers) // shape.layers
    return per // tp


def _oom(what_gib: float, free_gib: float, total_gib: float) -> EngineStartError:
    return EngineStartError(
        TrialOutcome.OOM,
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {what_gib:.2f} GiB. GPU 0 has a "
        f"total capacity of {total_gib:.2f} GiB of which {max(free_gib, 0.0):.2f} GiB is free.",
    )


def plan_vllm(shape: ModelShape, gpu: GPU, a: dict[str, Any], max_model_len: int, tp: int, dtype: str, *,
              fp8_weights: bool = False, fp8_kv: bool = False, draft_layers: int = 0) -> MemoryPlan:
    nb = dtype_bytes(dtype)
    check_common(shape, max_model_len, tp)
    gmu, mbt, mns, bs = a["gpu_memory_utilization"], a["max_num_batched_tokens"], a["max_num_seqs"], a["block_size"]
    if not 0 < gmu <= 1:
        raise EngineStartError(TrialOutcome.START_FAILED, f"ValueError: GPU memory utilization must be within (0, 1]. Got {gmu}.")
    if bs not in VLLM_BLOCK_SIZES:
        raise EngineStartError(TrialOutcome.START_FAILED, f"ValueError: block_size must be one of {list(VLLM_BLOCK_SIZES)}, got {bs}.")
    if mns < 1 or mbt < 1:
        raise EngineStartError(TrialOutcome.START_FAILED, "ValueError: max_num_seqs and max_num_batched_tokens must be >= 1.")
    if mbt < mns:
        raise EngineStartError(
            TrialOutcome.START_FAILED,
            f"ValueError: max_num_batched_tokens ({mbt}) must be greater than or equal to max_num_seqs ({mns}).",
        )
    if not a["enable_chunked_prefill"] and mbt < max_model_len:
        raise EngineStartError(
            TrialOutcome.START_FAILED,
            f"ValueError: max_num_batched_tokens ({mbt}) is smaller than max_model_len ({max_model_len}). "
            "This effectively limits the maximum sequence length to max_num_batched_tokens and makes vLLM "
            "reject longer sequences. Please increase max_num_batched_tokens or decrease max_model_len.",
        )
    total = gpu.mem_gib
    free = total - FREE_AT_START_GIB
    weights = _weights(shape, tp, nb, fp8_weights, draft_layers)
    act = activation_gib(shape, mbt, tp)
    graphs = 0.0 if a["enforce_eager"] else cuda_graph_gib(shape, a["max_cudagraph_capture_size"])
    if weights > free:
        raise _oom(weights, free, total)
    if weights + act + NON_TORCH_GIB > free:
        raise _oom(act, free - weights, total)
    want = gmu * total
    if a.get("kv_cache_memory_bytes"):
        kv = a["kv_cache_memory_bytes"] / GIB
        if weights + act + NON_TORCH_GIB + kv > free:
            raise _oom(kv, free - weights - act - NON_TORCH_GIB, total)
    else:
        if want > free:
            raise EngineStartError(
                TrialOutcome.OOM,
                f"ValueError: Free memory on device ({free:.2f}/{total:.2f} GiB) on startup is less than desired "
                f"GPU memory utilization ({gmu}, {want:.2f} GiB). Decrease GPU memory utilization or reduce GPU "
                "memory used by other processes.",
            )
        kv = want - weights - act - NON_TORCH_GIB
        if kv <= 0:
            raise EngineStartError(
                TrialOutcome.OOM,
                "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
                "when initializing the engine.",
            )
    if weights + act + NON_TORCH_GIB + kv + graphs > free:
        raise _oom(graphs, free - weights - act - NON_TORCH_GIB - kv, total)
    per_tok = _kv_per_token(shape, tp, nb, fp8_kv, draft_layers)
    blocks = int(kv * GIB // (per_tok * bs))
    tokens = blocks * bs
    if tokens < max_model_len:
        need = max_model_len * per_tok / GIB
        raise EngineStartError(
            TrialOutcome.OOM,
            f"ValueError: To serve at least one request with the models's max seq len ({max_model_len}), "
            f"({need:.2f} GiB KV cache is needed, which is larger than the available KV cache memory "
            f"({kv:.2f} GiB). Based on the available memory, the estimated maximum model length is {tokens}. "
            "Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
        )
    return MemoryPlan(weights, act, graphs, kv, tokens, per_tok)


def plan_sglang(shape: ModelShape, gpu: GPU, a: dict[str, Any], max_model_len: int, tp: int, dtype: str, *,
                fp8_weights: bool = False, fp8_kv: bool = False, draft_layers: int = 0) -> MemoryPlan:
    nb = dtype_bytes(dtype)
    check_common(shape, max_model_len, tp)
    mfs, chunk, page = a["mem_fraction_static"], a["chunked_prefill_size"], a["page_size"]
    if not 0 < mfs < 1:
        raise EngineStartError(TrialOutcome.START_FAILED, f"ValueError: mem_fraction_static must be in (0, 1), got {mfs}")
    if page < 1 or chunk == 0 or a["max_prefill_tokens"] < 1:
        raise EngineStartError(TrialOutcome.START_FAILED, "ValueError: page_size, chunked_prefill_size and max_prefill_tokens must be positive")
    total = gpu.mem_gib
    free = total - FREE_AT_START_GIB
    weights = _weights(shape, tp, nb, fp8_weights, draft_layers)
    if weights > free:
        raise _oom(weights, free, total)
    # SGLang sizes the pool from the free memory it measures after loading the weights, less (1 - mfs) x total: what
    # the context held before it started comes out of the pool (its logs: 363,119 tokens on the H100, 803,502 on the
    # H200; this gives 363,234 and 804,443)
    kv = mfs * total - weights - FREE_AT_START_GIB
    if kv <= 0:
        raise EngineStartError(TrialOutcome.OOM, "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.")
    per_tok = _kv_per_token(shape, tp, nb, fp8_kv, draft_layers)
    tokens = int(kv * GIB // (per_tok * page)) * page
    act = activation_gib(shape, chunk if chunk > 0 else max_model_len, tp)
    graph_bs = 0 if a["disable_cuda_graph"] else a["cuda_graph_max_bs"]
    graphs = cuda_graph_gib(shape, graph_bs)
    left = free - mfs * total
    if act + NON_TORCH_GIB > left:
        raise _oom(act, left - NON_TORCH_GIB, total)
    if act + NON_TORCH_GIB + graphs > left:
        raise EngineStartError(
            TrialOutcome.OOM,
            "Exception: Capture cuda graph failed: CUDA out of memory. Possible solutions: 1. set "
            "--mem-fraction-static to a smaller value (e.g., 0.8 or 0.7) 2. set --cuda-graph-max-bs to a "
            "smaller value (e.g., 16) 3. disable CUDA graph by --disable-cuda-graph",
        )
    if tokens < max_model_len:
        raise EngineStartError(
            TrialOutcome.OOM,
            f"RuntimeError: max_total_num_tokens={tokens} is smaller than context_len={max_model_len}. "
            "Please increase --mem-fraction-static or decrease --context-length.",
        )
    return MemoryPlan(weights, act, graphs, kv, tokens, per_tok)
