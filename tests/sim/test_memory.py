"""Start-time memory checks: failures look like the real engines' and carry the right outcome."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from tuner.common.errors import EngineStartError
from tuner.sim import SimulatedEngine


def start(flavour: str = "vllm", gpu: str = "H200", shape: str = "qwen3-8b", mml: int = 40960, tp: int = 1,
          **args: object) -> SimulatedEngine:
    return SimulatedEngine(flavour=flavour, gpu=gpu, shape=shape, args=args, max_model_len=mml,
                           tensor_parallel_size=tp)


def test_memory_utilization_above_free_memory_fails_like_vllm() -> None:
    with pytest.raises(EngineStartError) as e:
        start(gpu_memory_utilization=0.999)
    assert e.value.outcome == "oom"
    assert "Free memory on device" in e.value.reason and "less than desired GPU memory utilization" in e.value.reason


def test_kv_cache_too_small_for_max_model_len_fails_to_start() -> None:
    with pytest.raises(EngineStartError) as e:
        start(gpu_memory_utilization=0.13)  # weights fit, KV holds fewer tokens than one 40960 sequence
    assert e.value.outcome == "oom"
    assert "max seq len (40960)" in e.value.reason and "estimated maximum model length" in e.value.reason
    assert start(gpu_memory_utilization=0.13, mml=4096).kv_capacity_tokens >= 4096  # a shorter context fits


def test_weights_larger_than_the_gpu_are_oom() -> None:
    with pytest.raises(EngineStartError) as e:
        start(gpu="L40S", shape="llama-3.1-70b", mml=8192)
    assert e.value.outcome == "oom" and "CUDA out of memory" in e.value.reason


def test_no_room_for_the_cache_blocks() -> None:
    with pytest.raises(EngineStartError) as e:
        start(gpu_memory_utilization=0.1, mml=1024)
    assert e.value.outcome == "oom" and "No available memory for the cache blocks" in e.value.reason


def test_tensor_parallel_shards_weights_and_kv() -> None:
    one = start(gpu="H100", shape="qwen3-32b", mml=8192)
    two = start(gpu="H100", shape="qwen3-32b", mml=8192, tp=2)
    assert two.kv_capacity_tokens > 2 * one.kv_capacity_tokens  # weights split too: more than twice the KV
    assert start(gpu="H100", shape="llama-3.1-70b", mml=8192, tp=4).kv_capacity_tokens > 100_000
    with pytest.raises(EngineStartError, match="divisible"):
        start(shape="qwen3-8b", tp=3)


def test_sim_outcomes_agree_with_the_launcher_classifying_the_same_message() -> None:
    """The server face prints these reasons and tuner.engines classifies them: both faces must agree."""
    from tuner.engines.sim import SimEngine

    cases = [("vllm", {"gpu_memory_utilization": 0.999}, 40960), ("vllm", {"gpu_memory_utilization": 0.13}, 40960),
             ("vllm", {"gpu_memory_utilization": 0.1}, 1024), ("vllm", {"max_num_seqs": 512, "max_num_batched_tokens": 256}, 8192),
             ("sglang", {"mem_fraction_static": 0.1}, 8192), ("sglang", {"mem_fraction_static": 0.995}, 8192)]
    for flavour, args, mml in cases:
        with pytest.raises(EngineStartError) as e:
            start(flavour, mml=mml, **args)
        outcome, _ = SimEngine(flavour).classify(1, e.value.reason)
        assert outcome.value == e.value.outcome, (flavour, args, e.value.reason)


def test_vllm_config_checks() -> None:
    with pytest.raises(EngineStartError, match="greater than or equal to max_num_seqs"):
        start(max_num_seqs=512, max_num_batched_tokens=256)
    with pytest.raises(EngineStartError, match="smaller than max_model_len"):
        start(enable_chunked_prefill=False, max_num_batched_tokens=8192, mml=16384)
    with pytest.raises(EngineStartError, match="greater than the derived max_model_len"):
        start(mml=131072)
    with pytest.raises(EngineStartError, match="block_size"):
        start(block_size=12)


def test_sglang_memory_fraction_too_high_fails_in_graph_capture() -> None:
    with pytest.raises(EngineStartError) as e:
        start("sglang", mem_fraction_static=0.975, cuda_graph_max_bs=1024)
    assert e.value.outcome == "oom" and "Capture cuda graph failed" in e.value.reason
    start("sglang", mem_fraction_static=0.975, cuda_graph_max_bs=1024, disable_cuda_graph=True)  # starts
    with pytest.raises(EngineStartError) as e:
        start("sglang", mem_fraction_static=0.995)
    assert e.value.outcome == "oom" and "CUDA out of memory" in e.value.reason


def test_sglang_memory_fraction_too_low_fails() -> None:
    with pytest.raises(EngineStartError) as e:
        start("sglang", mem_fraction_static=0.1)
    assert e.value.outcome == "oom" and "Not enough memory" in e.value.reason


def test_larger_memory_fraction_gives_more_kv() -> None:
    lo, hi = start("sglang", mem_fraction_static=0.8), start("sglang", mem_fraction_static=0.9)
    assert hi.kv_capacity_tokens > lo.kv_capacity_tokens
    assert hi.resolved["max_running_requests"] >= 1


REF = Path(__file__).resolve().parents[2] / "benchmarks/reference"


def _logged_pool(path: Path, pattern: str) -> int:
    if path.suffix == ".gz":
        with gzip.open(path, "rt") as f:
            text = f.read()
    else:
        text = path.read_text()
    m = re.search(pattern, text)
    assert m, f"{path}: no {pattern!r}"
    return int(m[1])


@pytest.mark.parametrize(("gpu", "log", "pattern", "fraction"), [
    ("H100", "h100-sglang-0.5.17-workload/ctxdef/server.log.gz", r"KV Cache is allocated.*#tokens: (\d+)", 0.83),
    ("H200", "h200-sglang-0.5.17-sweep/README.md", r"max_total_num_tokens=(\d+)", 0.903),
])
def test_sglang_default_pool_matches_its_logs(gpu: str, log: str, pattern: str, fraction: float) -> None:
    """SGLang's default static fraction is a fixed reserve off the card (0.83 on an H100, 0.903 on an H200 in its
    logs), and its pool loses what the context held before it started: the simulated pool is SGLang's within 0.2 %."""
    eng = start(flavour="sglang", gpu=gpu, mml=16384, attention_backend="triton")
    assert eng.cfg["mem_fraction_static"] == pytest.approx(fraction, abs=0.0015)
    assert eng.kv_capacity_tokens == pytest.approx(_logged_pool(REF / log, pattern), rel=0.002)


def test_sglang_reserve_is_fixed_so_smaller_cards_keep_a_smaller_fraction() -> None:
    h200, h100 = (start(flavour="sglang", gpu=g, mml=16384).cfg["mem_fraction_static"] for g in ("H200", "H100"))
    assert h200 > h100
    assert (1 - h100) * 79.19 == pytest.approx((1 - h200) * 139.8, rel=0.03)  # the same GiB held back on both
