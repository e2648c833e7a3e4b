"""Catalogues, name mapping, knob validation and the defaults the engines resolve."""

from __future__ import annotations

import pytest

from tuner.common.errors import SpecError
from tuner.sim import SimulatedEngine, default_args, known_gpus, known_shapes, shape_for
from tuner.sim.catalog import get_shape


def test_catalogues_cover_the_required_models_and_gpus() -> None:
    for name in ("qwen3-0.6b", "qwen3-4b", "qwen3-8b", "qwen3-14b", "qwen3-32b", "llama-3.1-8b", "llama-3.1-70b"):
        assert name in known_shapes()
    for gpu in ("H200", "H100", "A100", "L40S"):
        assert gpu in known_gpus()


@pytest.mark.parametrize(("name", "params_b"), [("qwen3-8b", 8.19), ("llama-3.1-70b", 70.55), ("qwen3-32b", 32.76)])
def test_parameter_counts_match_the_published_sizes(name: str, params_b: float) -> None:
    assert get_shape(name).total_params / 1e9 == pytest.approx(params_b, rel=0.01)


@pytest.mark.parametrize(("model", "shape"), [
    ("Qwen/Qwen3-8B", "qwen3-8b"), ("qwen3-8b", "qwen3-8b"), ("/models/Qwen3-14B/", "qwen3-14b"),
    ("meta-llama/Llama-3.1-70B-Instruct", "llama-3.1-70b"), ("Qwen/Qwen3-0.6B", "qwen3-0.6b"),
])
def test_shape_for_maps_model_names(model: str, shape: str) -> None:
    assert shape_for(model) == shape


def test_shape_for_unknown_model_names_the_known_shapes() -> None:
    with pytest.raises(SpecError, match="qwen3-8b"):
        shape_for("mistralai/Mistral-7B-v0.3")


def test_vllm_defaults_on_h200_match_the_reference_server() -> None:
    d = default_args("vllm", "H200", "qwen3-8b", 40960)
    assert (d["max_num_batched_tokens"], d["max_num_seqs"], d["gpu_memory_utilization"], d["block_size"]) == (
        8192, 1024, 0.92, 16)
    assert d["enable_chunked_prefill"] and d["max_cudagraph_capture_size"] == 512
    small = default_args("vllm", "L40S", "qwen3-8b", 8192)
    assert small["max_num_batched_tokens"] < 8192 and small["max_num_seqs"] < 1024


def test_kv_capacity_matches_the_reference_log() -> None:
    # benchmarks/reference/h200-vllm-0.26.0: "GPU KV cache size: 814,368 tokens" (818,048 on reruns)
    eng = SimulatedEngine(flavour="vllm", gpu="H200", shape="qwen3-8b", args={}, max_model_len=40960)
    assert eng.kv_capacity_tokens == pytest.approx(814_368, rel=0.01)
    assert eng.resolved["max_num_seqs"] == 1024 and eng.resolved["kv_capacity_tokens"] == eng.kv_capacity_tokens
    gmu = SimulatedEngine(flavour="vllm", gpu="H200", shape="qwen3-8b", args={"gpu_memory_utilization": 0.95},
                          max_model_len=40960)
    assert gmu.kv_capacity_tokens == pytest.approx(848_592, rel=0.01)
    # a second shape (benchmarks/reference/h200-vllm-0.26.0-qwen3-14b): "GPU KV cache size: 650,560 tokens"
    q14 = SimulatedEngine(flavour="vllm", gpu="H200", shape="qwen3-14b", args={}, max_model_len=40960)
    assert q14.kv_capacity_tokens == pytest.approx(650_560, rel=0.01)


def test_resolved_capture_size_follows_max_num_seqs_like_vllm() -> None:
    eng = SimulatedEngine(flavour="vllm", gpu="H200", shape="qwen3-8b", args={"max_num_seqs": 64}, max_model_len=40960)
    assert eng.resolved["max_cudagraph_capture_size"] == 128


@pytest.mark.parametrize(("flavour", "args"), [
    ("vllm", {"max_running_requests": 8}),  # an SGLang knob on the vLLM flavour
    ("sglang", {"max_num_seqs": 8}),
    ("vllm", {"max_num_sequences": 8}),
])
def test_unknown_knobs_are_spec_errors(flavour: str, args: dict) -> None:
    with pytest.raises(SpecError, match="unknown"):
        SimulatedEngine(flavour=flavour, gpu="H200", shape="qwen3-8b", args=args, max_model_len=8192)


def test_wrong_types_and_choices_are_spec_errors() -> None:
    with pytest.raises(SpecError, match="max_num_seqs"):
        SimulatedEngine(flavour="vllm", gpu="H200", shape="qwen3-8b", args={"max_num_seqs": "many"}, max_model_len=8192)
    with pytest.raises(SpecError, match="schedule_policy"):
        SimulatedEngine(flavour="sglang", gpu="H200", shape="qwen3-8b", args={"schedule_policy": "sjf"},
                        max_model_len=8192)
    with pytest.raises(SpecError, match="flavour"):
        SimulatedEngine(flavour="trtllm", gpu="H200", shape="qwen3-8b", args={}, max_model_len=8192)
    with pytest.raises(SpecError, match="GPU"):
        SimulatedEngine(flavour="vllm", gpu="TPUv5", shape="qwen3-8b", args={}, max_model_len=8192)


def test_string_values_from_command_lines_are_coerced() -> None:
    eng = SimulatedEngine(flavour="vllm", gpu="h100", shape="qwen3-8b",
                          args={"max-num-seqs": "64", "enable_chunked_prefill": "true"}, max_model_len=8192)
    assert eng.resolved["max_num_seqs"] == 64 and eng.resolved["enable_chunked_prefill"] is True
    assert eng.resolved["gpu"] == "H100"


@pytest.mark.parametrize(("gpu", "graph_bs", "chunk"), [("H200", 256, 8192), ("H100", 256, 8192), ("A100", 256, 8192),
                                                        ("L40S", 32, 4096)])
def test_sglang_defaults_follow_its_memory_branches(gpu: str, graph_bs: int, chunk: int) -> None:
    """SGLang picks its graph cap and prefill chunk by GPU memory alone (an A100 80GB gets the H100's, unlike vLLM's
    large-GPU defaults), and its static fraction is what is left after a fixed reserve: larger cards keep more."""
    a = default_args("sglang", gpu, "qwen3-8b", 16384)
    assert (a["cuda_graph_max_bs"], a["chunked_prefill_size"]) == (graph_bs, chunk)
    assert 0.8 < a["mem_fraction_static"] < 0.91
