"""Per-batch-size speculative tokens in the simulator (vLLM's num_speculative_tokens_per_batch_size):
a one-range schedule is exactly the fixed K, a schedule takes each batch size's K, and a bad schedule
fails the start as vLLM's config check does."""

from __future__ import annotations

import pytest

from tests.sim.golden import digest
from tests.sim.test_levers_sim import engine, tokens_per_s
from tuner.common.errors import EngineStartError
from tuner.load.records import Request
from tuner.sim.spec import dense_schedule


def spec(k: int, schedule: list[list[int]] | None = None) -> dict:
    sc: dict = {"method": "dflash", "num_speculative_tokens": k, "model": "d"}
    if schedule is not None:
        sc["num_speculative_tokens_per_batch_size"] = schedule
    return {"speculative_config": sc, "max_num_seqs": 256}


def _records(args: dict) -> str:
    reqs = [Request(i, i * 0.05, 1000, 200) for i in range(60)]
    return digest(engine(args, 16384).run(reqs))


def test_one_range_schedule_is_the_fixed_k() -> None:
    assert _records(spec(7, [[1, 256, 7]])) == _records(spec(7))
    assert _records(spec(15, [[1, 4, 7]])) == _records(spec(7))  # the tail keeps the last K
    assert _records(spec(15, [[1, 256, 7]])) != _records(spec(15))


def test_each_batch_size_runs_its_own_k() -> None:
    # DFlash gains at batch 1 and loses at 256 on short contexts: K=15 small, K=0 (no drafting) large
    sched = spec(15, [[1, 8, 15], [9, 256, 0]])
    small = tokens_per_s(engine(sched, 16384), 1, 128)
    assert abs(small / tokens_per_s(engine(spec(15), 16384), 1, 128) - 1) < 1e-9
    big = tokens_per_s(engine(sched, 16384), 256, 128)
    assert abs(big / tokens_per_s(engine({"max_num_seqs": 256}, 16384), 256, 128) - 1) < 0.02
    assert big > tokens_per_s(engine(spec(15), 16384), 256, 128)


def test_dense_schedule_rules() -> None:
    assert dense_schedule([[1, 2, 5], [5, 6, 1]], 8, 4) == (0, 4, 4, 4, 4, 1, 1, 1, 1)  # gap and tail carry, cap 4
    for bad, why in (([], "non-empty"), ([[2, 4, 1]], "start at batch size 1"), ([[1, 4, 1], [3, 8, 2]], "overlap"),
                     ([[1, 4]], r"not \[start, end, K\]"), ([[1, 4, -1]], "K >= 0")):
        with pytest.raises(EngineStartError, match=why):
            dense_schedule(bad, 8, 4)
    with pytest.raises(EngineStartError, match="num_speculative_tokens_per_batch_size"):
        engine(spec(4, [[3, 8, 2]]))
