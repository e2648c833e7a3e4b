"""The simulator's levers: FP8 memory and speed, speculative decoding's batch-size trade-off, TP/DP."""

from __future__ import annotations

import json

from tuner.load.records import Request
from tuner.sim import SimulatedEngine
from tuner.sim.server import _parser
from tuner.sim.spec import acceptance_rate, expected_tokens

DFLASH = {"speculative_config": {"method": "dflash", "num_speculative_tokens": 15, "model": "d"}}


def engine(args: dict, mml: int = 40960, **kw: object) -> SimulatedEngine:
    return SimulatedEngine(flavour="vllm", gpu="H200", shape="qwen3-8b", args=args, max_model_len=mml, **kw)


def tokens_per_s(eng: SimulatedEngine, conc: int, prompt: int = 2048) -> float:
    recs = eng.run([Request(i, 0.0, prompt, 256) for i in range(3 * conc)], concurrency=conc)
    ok = [r for r in recs if r.ok]
    assert len(ok) == len(recs)
    return sum(r.output_tokens for r in ok) / max(r.done_s for r in ok)  # type: ignore[type-var]


def test_fp8_kv_cache_and_weights_match_the_h200_kv_sizes() -> None:
    # vLLM 0.26 on an H200 (benchmarks/reference/h200-vllm-0.26.0-fp8/README.md): 814,368 tokens (bf16),
    # 1,628,752 (fp8 KV), 861,248 (fp8 weights), 1,722,512 (both)
    real = {(): 814368, ("kv",): 1628752, ("w",): 861248, ("kv", "w"): 1722512}
    for key, tokens in real.items():
        args = {**({"kv_cache_dtype": "fp8"} if "kv" in key else {}), **({"quantization": "fp8"} if "w" in key else {})}
        sim = engine(args).kv_capacity_tokens
        assert abs(sim / tokens - 1) < 0.01, (key, sim, tokens)


def test_fp8_weights_make_steps_faster() -> None:
    base, fp8 = engine({}), engine({"quantization": "fp8"})
    assert fp8.cost.step(8192, 4, 8e6, 8e4, False) < 0.85 * base.cost.step(8192, 4, 8e6, 8e4, False)
    assert fp8.cost.decode_base(1, True) < base.cost.decode_base(1, True)


def test_speculative_gain_falls_with_batch_and_turns_into_a_loss() -> None:
    # short contexts: decode turns compute-bound as the batch grows (long contexts stay KV-read-bound,
    # where verifying k+1 tokens per KV read keeps paying)
    gains = [tokens_per_s(engine(DFLASH, 16384), c, 128) / tokens_per_s(engine({}, 16384), c, 128)
             for c in (1, 16, 256)]
    assert gains[0] > 2.0  # memory-bound decode: verifying 16 tokens costs about as much as 1
    assert gains[0] > gains[1] > gains[2]
    assert gains[2] < 1.0  # compute-bound: 16x the verify work for ~5 tokens


def test_acceptance_model_inverts() -> None:
    a = acceptance_rate(2.9, 3)
    assert abs(expected_tokens(a, 3) - 2.9) < 1e-6
    assert expected_tokens(a, 8) > 2.9  # longer drafts yield more, with diminishing returns
    assert expected_tokens(a, 8) - expected_tokens(a, 7) < expected_tokens(a, 2) - expected_tokens(a, 1)


def test_study_acceptance_figure_is_used() -> None:
    low = engine(DFLASH, 16384, speculative={"dflash": {"acceptance_length": 1.2, "at_tokens": 15}})
    assert low.resolved["spec_tokens_per_step"] < 1.3
    assert tokens_per_s(low, 1) < tokens_per_s(engine(DFLASH, 16384), 1)


def test_speculative_outputs_are_exact_token_counts() -> None:
    recs = engine(DFLASH, 16384).run([Request(i, i * 0.05, 700, 37 + i) for i in range(40)])
    for r in recs:
        assert r.ok and r.output_tokens == 37 + r.id
        assert len(r.token_times) == r.output_tokens
        assert list(r.token_times) == sorted(r.token_times)


def test_data_parallel_replicas_double_capacity_and_tp_splits_memory() -> None:
    one, two = engine({}, 16384), engine({"data_parallel_size": 2}, 16384)
    assert two.resolved["gpus"] == 2
    assert tokens_per_s(two, 512) > 1.6 * tokens_per_s(one, 256)
    tp2 = engine({"tensor_parallel_size": 2}, 16384)
    assert tp2.resolved["weights_gib"] < 0.51 * one.resolved["weights_gib"]
    assert tp2.kv_capacity_tokens > 2 * one.kv_capacity_tokens


def test_server_face_parses_json_speculative_config() -> None:
    a = _parser("vllm").parse_args(["--model", "m", "--speculative-config", json.dumps(DFLASH["speculative_config"]),
                                    "--kv-cache-dtype", "fp8", "--data-parallel-size", "2"])
    assert a.speculative_config["method"] == "dflash" and a.kv_cache_dtype == "fp8" and a.data_parallel_size == 2
    s = _parser("sglang").parse_args(["--model", "m", "--speculative-algorithm", "DFLASH", "--tp-size", "2"])
    assert s.speculative_algorithm == "DFLASH" and s.tensor_parallel_size == 2


def tpot_of(eng: SimulatedEngine, reqs: list[Request]) -> float:
    r = eng.run(reqs)[0]
    assert r.ok and r.output_tokens == reqs[0].output_len
    return (r.token_times[-1] - r.token_times[0]) / (r.output_tokens - 1)


def test_spec_step_s_prices_every_vllm_verify_step_whatever_the_drafter() -> None:
    """Calibration.spec_step_s: a fixed time per verify step, the same for the CPU n-gram drafter, the GPU one and a
    model drafter (real n-gram runs: both n-gram drafters read the same TPOT, benchmarks/sim_spec_check.py); async
    scheduling is not switched off; without speculation, and on SGLang, it changes nothing."""
    from dataclasses import replace

    from tuner.sim.calibration import FITTED

    priced = replace(FITTED, spec_step_s=2e-3)
    reqs = [Request(i, i * 1.0, 1024, 256) for i in range(4)]  # one at a time: verify steps of one sequence
    for method in ("ngram", "ngram_gpu", "dflash"):
        sc = {"method": method, "num_speculative_tokens": 3, **({"model": "d"} if method == "dflash" else {})}
        fig = {method: {"acceptance_length": 3.9, "at_tokens": 3}}
        off = engine({"speculative_config": sc}, speculative=fig)
        on = engine({"speculative_config": sc}, speculative=fig, calibration=priced)
        assert "async_scheduling" not in on.resolved
        # ~66 verify steps of 3.9 tokens, each 2 ms longer: ~0.5 ms more per token
        assert 0.4e-3 < tpot_of(on, reqs) - tpot_of(off, reqs) < 0.6e-3, method
    a, b = engine({}).run(reqs), engine({}, calibration=priced).run(reqs)
    assert [x.token_times for x in a] == [x.token_times for x in b]
    sgl = {"speculative_algorithm": "NGRAM", "speculative_num_draft_tokens": 4}
    a, b = (SimulatedEngine(flavour="sglang", gpu="H200", shape="qwen3-8b", args=sgl, max_model_len=40960,
                            calibration=c).run(reqs) for c in (FITTED, priced))
    assert [x.token_times for x in a] == [x.token_times for x in b]


def test_gpu_ngram_drafting_verifies_like_ngram() -> None:
    """vLLM's `ngram_gpu` drafter (one lookup kernel a verify step) costs what the CPU n-gram drafter does at the same
    acceptance, within the kernel's launch: on one H100 the engine read the same P50 TPOT with either."""
    reqs = [Request(i, i * 0.5, 1024, 256) for i in range(4)]
    tpot = {}
    for method in ("ngram", "ngram_gpu"):
        args = {"speculative_config": {"method": method, "num_speculative_tokens": 3}}
        eng = engine(args, speculative={method: {"acceptance_length": 3.9, "at_tokens": 3}})
        tpot[method] = tpot_of(eng, reqs)
    assert abs(tpot["ngram_gpu"] - tpot["ngram"]) < 0.05e-3, tpot
    assert tpot["ngram_gpu"] < 0.5 * tpot_of(engine({}), reqs)  # ~3.9 tokens per verify step
