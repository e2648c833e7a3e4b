"""The virtual-time face: record contents, open and closed loop, limits, determinism, exactness."""

from __future__ import annotations

import dataclasses
from array import array
from pathlib import Path

import pytest
from simhelp import engine, poisson

from tuner.load.metrics import summarize
from tuner.load.records import Request
from tuner.load.records_io import RecordWriter, read_records
from tuner.load.vllm_result import result_json
from tuner.sim.calibration import FITTED
from tuner.sim.engine import SimulatedEngine


def test_records_hold_every_token_in_order() -> None:
    reqs = poisson(150, 6.0, inp=(100, 6000), out=(1, 700), seed=3)
    recs = engine(mml=8192).run(reqs)
    assert [r.id for r in recs] == [q.id for q in reqs]
    for q, r in zip(reqs, recs, strict=True):
        assert r.ok, r.error
        assert r.sent_s == q.arrival_s
        assert r.output_tokens == q.output_len == len(r.token_times)
        assert r.first_token_s == r.token_times[0] > r.sent_s
        assert r.done_s == r.token_times[-1]
        assert all(b > a for a, b in zip(r.token_times, r.token_times[1:], strict=False))


def test_too_long_requests_get_http_400_and_the_rest_still_run() -> None:
    reqs = [Request(0, 0.0, 100, 50), Request(1, 0.1, 8000, 500), Request(2, 0.2, 100, 50)]
    recs = engine(mml=8192).run(reqs)
    assert recs[1].error == "prompt too long (HTTP 400)" and recs[1].first_token_s is None
    assert recs[0].ok and recs[2].ok


def test_max_sim_time_marks_unfinished_requests_as_timeouts() -> None:
    reqs = poisson(50, 0, out=2000)
    recs = engine().run(reqs, max_sim_time_s=5.0)
    late = [r for r in recs if r.error == "timeout"]
    assert late and all(r.done_s is None for r in late)
    assert max(t for r in recs for t in r.token_times) < 5.5


def test_closed_loop_keeps_the_concurrency() -> None:
    reqs = poisson(60, 0, inp=(200, 3000), out=(20, 400), seed=1)
    recs = engine().run(reqs, concurrency=8)
    assert all(r.ok for r in recs)
    events = sorted([(r.sent_s, 1) for r in recs] + [(r.done_s, -1) for r in recs], key=lambda e: (e[0], e[1]))
    live = peak = 0
    for _, d in events:
        live += d
        peak = max(peak, live)
    assert peak == 8
    assert min(r.sent_s for r in recs[8:]) > 0  # later requests were sent when earlier ones finished


def test_runs_are_deterministic_and_warmup_is_copied() -> None:
    reqs = [Request(i, i * 0.1, 500, 100, warmup=i < 3) for i in range(20)]
    eng = engine()
    a, b = eng.run(reqs), eng.run(reqs)
    assert [r.token_times for r in a] == [r.token_times for r in b]
    assert [r.warmup for r in a] == [i < 3 for i in range(20)]


@pytest.mark.parametrize(("flavour", "args"), [
    ("vllm", {}),
    ("vllm", {"max_num_seqs": 24, "block_size": 32}),
    ("vllm", {"kv_cache_memory_bytes": 2 * 2**30}),  # tight KV: preemptions
    ("sglang", {}),
    ("vllm", {"enable_chunked_prefill": False, "max_num_batched_tokens": 8192}),
    ("vllm", {"max_num_partial_prefills": 2, "long_prefill_token_threshold": 1024, "max_num_batched_tokens": 2048}),
    ("sglang", {"mem_fraction_static": 0.14, "page_size": 16}),  # tight KV: retractions
    ("sglang", {"mem_fraction_static": 0.14, "schedule_policy": "lof", "chunked_prefill_size": 1024}),
])
@pytest.mark.parametrize("heat", [True, False])
@pytest.mark.parametrize("hold", [0, 1, 2])
def test_closed_form_decode_runs_equal_step_by_step(flavour: str, args: dict, heat: bool, hold: int) -> None:
    """The fast path must not change results: same records as one step at a time. With the committed calibration's
    heat term (vLLM) the decode runs are stepped at the moving clock (Core._decode_run_clocked); without it they are
    closed-form. With `prompt_hold` (a drawn launch) the steps around a prompt step run alone; hold 2 adds
    `sched_after_launch`."""
    reqs = poisson(120, 8.0, inp=(50, 4000), out=(1, 600), seed=7)
    cal = FITTED if heat else dataclasses.replace(FITTED, heat_slowdown=0.0)
    if hold:
        cal = dataclasses.replace(cal, prompt_hold=1, prompt_defer=0.0, prompt_cpu_step_s=0.02, prompt_cpu_step_cv=0.45,
                                  sched_after_launch=int(hold == 2))
    fast, slow = (SimulatedEngine(flavour=flavour, gpu="H200", shape="qwen3-8b", args=args, max_model_len=8192,
                                  calibration=cal) for _ in range(2))
    slow.macro_steps = False
    a, b = fast.run(reqs), slow.run(reqs)
    for x, y in zip(a, b, strict=True):
        assert (x.error, x.preemptions, len(x.token_times)) == (y.error, y.preemptions, len(y.token_times))
        assert x.token_times == pytest.approx(y.token_times, rel=1e-9, abs=1e-9)


def test_prefix_caching_skips_shared_prefix_compute() -> None:
    reqs = [Request(i, i * 0.5, 4000, 20, prefix_group=0, prefix_len=3800) for i in range(10)]
    cached = engine().run(reqs)
    plain = engine(enable_prefix_caching=False).run(reqs)
    ttft_c = sum(r.ttft_s for r in cached[1:])
    ttft_p = sum(r.ttft_s for r in plain[1:])
    assert ttft_c < 0.5 * ttft_p
    assert cached[0].ttft_s == pytest.approx(plain[0].ttft_s)


def test_array_token_times_read_like_lists(tmp_path: Path) -> None:
    """Sim records carry array('d') token times (no float object per token); the summary, vLLM's result JSON
    and the Parquet records must come out exactly as from the same records with lists."""
    reqs = poisson(120, 8.0, inp=(100, 4000), out=(1, 400), seed=5)
    recs = engine().run(reqs, max_sim_time_s=8.0)
    assert all(isinstance(r.token_times, array) for r in recs) and any(r.error == "timeout" for r in recs)
    lists = [dataclasses.replace(r, token_times=list(r.token_times)) for r in recs]
    assert summarize(recs) == summarize(lists)
    run = {"model_id": "m"}
    assert ({**result_json(recs, summarize(recs), run=run, detailed=True), "date": ""}
            == {**result_json(lists, summarize(lists), run=run, detailed=True), "date": ""})
    for name, rows in (("a", recs), ("b", lists)):
        w = RecordWriter(tmp_path / f"{name}.parquet")
        for r in rows:
            w.write(r)
        w.close()
    assert read_records(tmp_path / "a.parquet").equals(read_records(tmp_path / "b.parquet"))
