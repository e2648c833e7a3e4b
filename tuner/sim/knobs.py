"""Engine knobs per flavour: names (the real engines' flags in snake_case), types and defaults.

Defaults follow what vLLM 0.26 resolves on a given GPU (read from the reference server logs for
H200) and SGLang 0.5's server_args (approximated where they depend on profiling: documented in
docs/sim.md). Unknown knobs and wrong types are a SpecError, as the real argument parsers refuse them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tuner.common.errors import SpecError
from tuner.sim.catalog import GPU, get_gpu

FLAVOURS = ("vllm", "sglang")

VLLM_KNOBS: dict[str, type] = {
    "max_num_seqs": int,
    "max_num_batched_tokens": int,
    "gpu_memory_utilization": float,
    "block_size": int,
    "enable_chunked_prefill": bool,
    "max_num_partial_prefills": int,
    "long_prefill_token_threshold": int,
    "scheduling_policy": str,
    "enable_prefix_caching": bool,
    "enforce_eager": bool,
    "max_cudagraph_capture_size": int,
    "kv_cache_memory_bytes": int,
    # levers (docs/sim.md "Levers"): precision, speculative decoding, layout, streaming
    "kv_cache_dtype": str,
    "quantization": str,
    "speculative_config": dict,
    "tensor_parallel_size": int,
    "data_parallel_size": int,
    "stream_interval": int,
    "attention_backend": str,
}

SGLANG_KNOBS: dict[str, type] = {
    "max_running_requests": int,
    "chunked_prefill_size": int,
    "max_prefill_tokens": int,
    "mem_fraction_static": float,
    "page_size": int,
    "schedule_policy": str,
    "schedule_conservativeness": float,
    "cuda_graph_max_bs": int,
    "disable_cuda_graph": bool,
    "disable_radix_cache": bool,
    "kv_cache_dtype": str,
    "quantization": str,
    "speculative_algorithm": str,
    "speculative_num_steps": int,
    "speculative_eagle_topk": int,
    "speculative_num_draft_tokens": int,
    "speculative_draft_model_path": str,
    "tp_size": int,
    "dp_size": int,
    "enable_mixed_chunk": bool,
    "enable_torch_compile": bool,
    "attention_backend": str,
    "stream_interval": int,
}

CHOICES: dict[str, tuple[str, ...]] = {
    "scheduling_policy": ("fcfs", "priority"),
    "schedule_policy": ("fcfs", "lpm", "dfs-weight", "lof", "random"),
    "kv_cache_dtype": ("auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2"),
    "quantization": ("fp8",),  # the only weight quantisation the sim models
    "speculative_algorithm": ("NGRAM", "EAGLE", "EAGLE3", "DFLASH", "NEXTN"),
}
# knobs that default to "not set" (None) on both flavours; listed once so defaults stay short
_UNSET_VLLM = ("kv_cache_dtype", "quantization", "speculative_config", "attention_backend")
_UNSET_SGLANG = ("quantization", "speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
                 "speculative_num_draft_tokens", "speculative_draft_model_path", "attention_backend")


def knobs(flavour: str) -> dict[str, type]:
    if flavour == "vllm":
        return VLLM_KNOBS
    if flavour == "sglang":
        return SGLANG_KNOBS
    raise SpecError(f"unknown sim flavour {flavour!r}", "sim.flavour", f"use one of {list(FLAVOURS)}")


def _sglang_chunk(gpu: GPU) -> int:
    """SGLang picks chunked_prefill_size from the GPU memory size (0.5.x server_args: 8k up to 160 GiB, H200 included,
    as its H200 log says; 16k from B200 / MI300 up)."""
    if gpu.mem_gib < 35:
        return 2048
    if gpu.mem_gib < 60:
        return 4096
    if gpu.mem_gib < 160:
        return 8192
    return 16384


def _sglang_graph_bs(gpu: GPU) -> int:
    """SGLang's decode CUDA-graph batch cap by GPU memory, below 4-way tensor parallelism (0.5.x server_args)."""
    for below, bs in ((20, 8), (35, 24), (60, 32), (160, 256)):
        if gpu.mem_gib < below:
            return bs
    return 512


# SGLang's prefill CUDA-graph capture sizes: (first, last, step) runs, those up to its prefill chunk are captured
_PREFILL_GRAPH_RUNS = ((4, 32, 4), (48, 256, 16), (288, 512, 32), (576, 1024, 64), (1280, 4096, 256), (4608, 1 << 30, 512))


def _sglang_mem_fraction(gpu: GPU, chunk: int, graph_bs: int) -> float:
    """SGLang 0.5.x's own default: a fixed reserve in MiB, not a share of the card: 512 + 1.5 per token of the
    larger of the prefill chunk and 2048 (activations) + 128 (one GPU's parallel slack) + 2 per decode graph batch
    size + 8 per prefill graph capture size, at least 10 GiB on cards over 60 GiB; the rest of the card, rounded
    to 3 places, is the static fraction. Its logs: 0.903 on the H200 (this gives 0.903) and 0.83 on the H100 (0.829:
    torch's total, which `mem_gib` is, is 469 MiB under nvidia-smi's, which SGLang reads);
    benchmarks/reference/h*-sglang-0.5.17-*/."""
    n_prefill = sum(len(range(a, min(b, chunk) + 1, step)) for a, b, step in _PREFILL_GRAPH_RUNS if a <= chunk)
    reserve = 512 + 1.5 * max(chunk, 2048) + 128 + 2 * graph_bs + 8 * n_prefill
    mib = gpu.mem_gib * 1024
    if mib > 60 * 1024:
        reserve = max(reserve, 10 * 1024)
    return round((mib - reserve) / mib, 3)


def default_args(flavour: str, gpu: str, shape: str, max_model_len: int) -> dict[str, Any]:
    """The engine's own defaults for this GPU, as it would resolve them at start."""
    g = get_gpu(gpu)
    if flavour == "vllm":
        mbt = 8192 if g.large else 2048
        mns = 1024 if g.large else 256
        return {
            "max_num_seqs": mns,
            "max_num_batched_tokens": mbt,
            "gpu_memory_utilization": 0.92,
            "block_size": 16,
            "enable_chunked_prefill": True,
            "max_num_partial_prefills": 1,
            "long_prefill_token_threshold": 0,
            "scheduling_policy": "fcfs",
            "enable_prefix_caching": True,
            "enforce_eager": False,
            "max_cudagraph_capture_size": min(2 * mns, 512),
            "kv_cache_memory_bytes": None,
            **dict.fromkeys(_UNSET_VLLM),
            "tensor_parallel_size": None,  # None: the study's model.tensor_parallel_size
            "data_parallel_size": 1,
            "stream_interval": 1,
        }
    if flavour == "sglang":
        chunk = _sglang_chunk(g)
        graph_bs = _sglang_graph_bs(g)
        return {
            "max_running_requests": None,  # resolved from the KV pool size at start
            "chunked_prefill_size": chunk,
            "max_prefill_tokens": 16384,
            "mem_fraction_static": _sglang_mem_fraction(g, chunk, graph_bs),
            "page_size": 1,
            "schedule_policy": "fcfs",
            "schedule_conservativeness": 1.0,
            "cuda_graph_max_bs": graph_bs,
            "disable_cuda_graph": False,
            "disable_radix_cache": False,
            **dict.fromkeys(_UNSET_SGLANG),
            "kv_cache_dtype": "auto",
            "tp_size": None,  # None: the study's model.tensor_parallel_size
            "dp_size": 1,
            "enable_mixed_chunk": False,
            "enable_torch_compile": False,
            "stream_interval": 1,
        }
    knobs(flavour)  # raises
    return {}


def _coerce(name: str, kind: type, value: Any, where: str) -> Any:
    if value is None:
        return None
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
            return value.lower() in ("true", "1")
    elif kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value)
    elif kind is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
    elif kind is dict:
        if isinstance(value, str):
            import json

            try:
                value = json.loads(value)
            except ValueError:
                raise SpecError(f"{name}={value!r} is not valid JSON", where, "give a JSON object") from None
        if isinstance(value, dict):
            return value
    elif kind is str and isinstance(value, str):
        if name == "speculative_algorithm":
            value = value.upper()
        choices = CHOICES.get(name)
        if choices and value not in choices:
            raise SpecError(f"{name}={value!r} is not a valid choice", where, f"use one of {list(choices)}")
        return value
    raise SpecError(f"{name}={value!r} must be {kind.__name__}", where, f"give a {kind.__name__} value")


def resolve_args(
    flavour: str, gpu: str, shape: str, max_model_len: int, args: Mapping[str, Any]
) -> dict[str, Any]:
    """Defaults overlaid with the given knobs, each checked for name and type."""
    table = knobs(flavour)
    out = default_args(flavour, gpu, shape, max_model_len)
    user_set_mns = False
    for name, value in args.items():
        key = name.replace("-", "_")
        if key not in table:
            raise SpecError(
                f"unknown {flavour} argument {name!r}", f"args.{name}", f"use one of {sorted(table)}"
            )
        out[key] = _coerce(key, table[key], value, f"args.{name}")
        user_set_mns |= key == "max_num_seqs"
    if flavour == "vllm" and "max_cudagraph_capture_size" not in args and user_set_mns:
        out["max_cudagraph_capture_size"] = min(2 * out["max_num_seqs"], 512)
    for key in ("tensor_parallel_size", "data_parallel_size", "tp_size", "dp_size", "stream_interval"):
        if out.get(key) is not None and out[key] < 1:
            raise SpecError(f"{key}={out[key]} must be >= 1", f"args.{key}", "give 1 or more")
    if flavour == "vllm" and out["enforce_eager"]:
        out["max_cudagraph_capture_size"] = 0
    return out
