"""`tpe-coord`'s lever check after a stall (`CoordPolishSampler(stall=n, levers=...)`, search46): once n trials have
launched since the incumbent without beating it, its untried moves of the knobs that change outputs go first."""

from __future__ import annotations

from typing import Any

from optuna.distributions import CategoricalDistribution, IntDistribution
from optuna.trial import FrozenTrial, create_trial

from tests.search.helpers import ask_move, core_for
from tests.search.test_levers import DFLASH, study
from tuner.search.coord_polish import CoordPolishSampler

DISTS = {
    "method": CategoricalDistribution(["dflash", "ngram"]),
    "kv": CategoricalDistribution(["auto", "fp8"]),
    "draft": IntDistribution(1, 16, log=True),
    "seqs": IntDistribution(16, 1024, log=True),
    "chunk": IntDistribution(512, 16384, log=True),
}
LEVERS = frozenset({"method", "kv", "draft"})
BEST = {"method": "dflash", "kv": "fp8", "draft": 16, "seqs": 256, "chunk": 8192}


def _trial(value: float, **change: Any) -> FrozenTrial:
    return create_trial(params={**BEST, **change}, distributions=DISTS, value=value, constraints={"sla": -0.1})


def _told(after: int) -> list[FrozenTrial]:
    """Dynamic seed 869's pattern: the incumbent (draft 16 at 256 sequences, 0.93) came after draft 8 was measured
    only at 16 sequences, where it lost; then `after` trials that did not beat it, all moving the batch cap."""
    early = [_trial(0.80, seqs=16), _trial(0.76, seqs=16, draft=8), _trial(0.55, seqs=16, kv="auto"),
             _trial(0.60, method="ngram", seqs=16), _trial(0.93)]
    later = (512, 128, 1024, 64, 384, 320, 192, 768, 96)
    return early + [_trial(0.90 - 0.01 * i, seqs=s) for i, s in enumerate(later[:after])]


def _next_move(told: list[FrozenTrial], stall: int, **end: Any) -> tuple[str, Any] | None:
    sampler = CoordPolishSampler(seed=0, n_startup_trials=0, move_share=1.0, draw_scale=0.0, near_fail=3.0,
                                 flat_interval=False, sweep="none", polish=0, levers=LEVERS, stall=stall, **end)
    return ask_move(sampler, told, DISTS)


def test_a_stalled_incumbent_moves_a_lever_next() -> None:
    """Eight trials after the incumbent without a gain: the next move is one of its untried lever moves; before the
    eighth, or without `stall`, the model's own choice, which is not."""
    stalled = _next_move(_told(8), stall=8)
    assert stalled is not None and stalled[0] in LEVERS, stalled
    for move in (_next_move(_told(7), stall=8), _next_move(_told(8), stall=0)):
        assert move is not None and move[0] not in LEVERS, move


def test_the_space_names_its_levers_and_their_children() -> None:
    """Space.levers: the vLLM space's output-changing knobs (an output_class) and the knobs active only under one of
    them; the scheduler knobs are not levers."""
    _, space = core_for(study(allow=["fp8_weights", "fp8_kv_cache", "speculative_decoding"], speculative=DFLASH))
    levers = {n.split(".", 1)[1] for n in space.levers()}  # Optuna names are <engine>.<knob>
    assert {"kv_cache_dtype", "quantization", "speculative_config.method",
            "speculative_config.num_speculative_tokens"} <= levers
    assert not levers & {"max_num_seqs", "max_num_batched_tokens", "gpu_memory_utilization"}
    _, closed = core_for(study())  # without allow: the levers are pinned at baseline, nothing to check
    assert not {n.split(".", 1)[1] for n in closed.levers()} & {"kv_cache_dtype", "quantization",
                                                               "speculative_config.method"}


def test_the_last_trials_of_the_budget_move_a_lever_however_recent_the_incumbent() -> None:
    """`stall_end` e: the lever check also holds in the last e trials of `budget`, where a late incumbent never
    reaches n trials without a gain; one trial earlier, the model's choice."""
    told = _told(2)  # 7 told: the trial being planned is the 8th
    last = _next_move(told, stall=8, budget=9, stall_end=2)
    assert last is not None and last[0] in LEVERS, last
    for move in (_next_move(told, stall=8, budget=10, stall_end=2), _next_move(told, stall=8, budget=9)):
        assert move is not None and move[0] not in LEVERS, move
    alone = _next_move(told, stall=0, budget=9, stall_end=2)  # without the stall check, the end still moves a lever
    assert alone is not None and alone[0] in LEVERS, alone
    early = _next_move(told, stall=0, budget=10, stall_end=2)
    assert early is not None and early[0] not in LEVERS, early


def test_end_moves_make_every_last_trial_a_move() -> None:
    """`end_moves`: with `move_share` 0 (every guided trial a TPE draw) the last `stall_end` trials are still moves."""
    def move(**end: Any) -> tuple[str, Any] | None:
        sampler = CoordPolishSampler(seed=0, n_startup_trials=0, move_share=0.0, draw_scale=0.0, near_fail=3.0,
                                     flat_interval=False, sweep="none", polish=0, levers=LEVERS, stall=8, budget=9,
                                     **end)
        return ask_move(sampler, _told(2), DISTS)

    forced = move(stall_end=2, end_moves=True)
    assert forced is not None and forced[0] in LEVERS, forced
    assert move(stall_end=2) is None
