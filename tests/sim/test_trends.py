"""Trends the real engines show, reproduced by the simulator (virtual time, so deterministic)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from simhelp import engine, itls, out_tok_s, p, poisson, ttfts

from tuner.common.errors import EngineStartError
from tuner.load.records import Request
from tuner.sim.reference import ALL_POINTS, simulate

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("flavour", "knob"), [("vllm", "max_num_seqs"), ("sglang", "max_running_requests")])
def test_throughput_rises_with_max_running_until_memory_binds(flavour: str, knob: str) -> None:
    reqs = poisson(600, 0)  # 2048 in / 512 out, all at once: saturation
    tput = {m: out_tok_s(engine(flavour, **{knob: m}).run(reqs, concurrency=600)) for m in (4, 16, 64, 256, 1024)}
    assert tput[4] < tput[16] < tput[64] < tput[256]
    assert tput[16] > 2 * tput[4]  # far from the bound: nearly linear
    assert tput[256] < 1.5 * tput[64]  # near the bound: diminishing
    assert tput[1024] < 1.05 * tput[256]  # KV-bound: more slots buy nothing


@pytest.mark.parametrize(("flavour", "small"), [
    ("vllm", {"kv_cache_memory_bytes": 3 * 2**30}),
    ("sglang", {"mem_fraction_static": 0.135}),
])
def test_small_kv_cache_preempts_and_blows_up_p99(flavour: str, small: dict) -> None:
    reqs = poisson(300, 6.0)
    big_recs = engine(flavour).run(reqs)
    small_recs = engine(flavour, **small).run(reqs)
    assert sum(r.preemptions for r in big_recs) == 0
    assert sum(r.preemptions for r in small_recs) > 10
    assert p(ttfts(small_recs), 99) > 20 * p(ttfts(big_recs), 99)
    assert p([r.e2e_s for r in small_recs], 99) > 3 * p([r.e2e_s for r in big_recs], 99)


def test_larger_step_budget_lowers_long_prompt_ttft_and_raises_decode_stalls() -> None:
    running = [Request(i, i * 0.01, 200, 3000) for i in range(48)]  # decodes in flight
    long_prompts = [Request(100 + i, 2.0 + i * 1.5, 12000, 8) for i in range(6)]
    out = {}
    for mbt in (2048, 16384):
        recs = engine(max_num_batched_tokens=mbt).run(running + long_prompts)
        long_ttft = sum(r.ttft_s for r in recs if r.id >= 100) / len(long_prompts)  # type: ignore[misc]
        stall = max(itls([r for r in recs if r.id < 100]))
        out[mbt] = (long_ttft, stall)
    assert out[16384][0] < out[2048][0]
    assert out[16384][1] > 2 * out[2048][1]


def test_memory_settings_too_high_fail_to_start() -> None:
    kv = [engine(gpu_memory_utilization=g).kv_capacity_tokens for g in (0.5, 0.7, 0.9, 0.95)]
    assert kv == sorted(kv)
    with pytest.raises(EngineStartError) as e:
        engine(gpu_memory_utilization=0.999)
    assert e.value.outcome == "oom"


def _reference_r75(cfg: str) -> dict:
    path = ROOT / "benchmarks" / "reference" / "h200-vllm-0.26.0" / "rates" / f"bench_{cfg}_r7.5.json"
    return json.loads(path.read_text())


def test_small_max_num_seqs_keeps_tpot_low_at_high_rate() -> None:
    """The reference's mns64 at 7.5 req/s (the real point, max_num_seqs=64): P99 TPOT below the default's
    (measured on H200, vLLM 0.26: 16.32 ms vs 18.48 ms)."""
    ref = _reference_r75("mns64")["p99_tpot_ms"], _reference_r75("default")["p99_tpot_ms"]
    assert ref[0] < ref[1]
    reqs = poisson(200, 7.5, seed=2)
    default, mns64 = engine().run(reqs), engine(max_num_seqs=64).run(reqs)
    assert p([r.tpot_s for r in mns64], 99) < p([r.tpot_s for r in default], 99)  # type: ignore[misc]


def test_small_max_num_seqs_queues_at_high_rate() -> None:
    """The reference's mns64 at 7.5 req/s: P99 TTFT jumps (4.6x the default's on the H200), on the arrivals the
    client really drew (tuner.sim.reference.simulate): the simulator gives 1289 vs 244 ms (real 1287 vs 278)."""
    ratio = _reference_r75("mns64")["p99_ttft_ms"] / _reference_r75("default")["p99_ttft_ms"]
    assert ratio > 3
    sim = {pt.name: simulate(pt)["p99_ttft_ms"] for pt in ALL_POINTS
           if pt.set_name == "h200-vllm-0.26.0" and pt.name in ("mns64_r7.5", "default_r7.5")}
    assert sim["mns64_r7.5"] > 3 * sim["default_r7.5"]


@pytest.mark.xfail(strict=True, reason="issue 17's prompt-step terms: on this other Poisson draw the ratio is 1.7x "
                   "(3.2x before): mns64 at 7.5 req/s sits at the edge of its 64-sequence cap, where the draw decides")
def test_small_max_num_seqs_queues_at_high_rate_on_another_draw() -> None:
    reqs = poisson(200, 7.5, seed=2)
    default, mns64 = engine().run(reqs), engine(max_num_seqs=64).run(reqs)
    assert p(ttfts(mns64), 99) > 3 * p(ttfts(default), 99)


def test_cuda_graphs_and_eager_mode() -> None:
    reqs = poisson(200, 0)
    graphs = out_tok_s(engine().run(reqs))
    eager = out_tok_s(engine(enforce_eager=True).run(reqs))
    assert eager < 0.97 * graphs


def test_faster_gpu_and_tensor_parallel_serve_more() -> None:
    reqs = poisson(300, 0, inp=1024, out=256)
    a100 = out_tok_s(engine(gpu="A100").run(reqs))
    h100 = out_tok_s(engine(gpu="H100").run(reqs))
    assert h100 > 1.3 * a100
    tp1 = out_tok_s(engine(gpu="H100", shape="qwen3-32b", mml=8192).run(reqs))
    tp2 = out_tok_s(engine(gpu="H100", shape="qwen3-32b", mml=8192, tp=2).run(reqs))
    assert tp2 > 1.3 * tp1  # more compute, and far more KV room (weights are split too)
