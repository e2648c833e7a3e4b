"""`tpe-coord`'s bracket move (tuner/search/bracket.py, search43): a numeric knob of the incumbent goes into the gap
of its profile that a fitted parabola rates highest, read in the incumbent's own setting."""

from __future__ import annotations

from typing import Any

from optuna.distributions import CategoricalDistribution, IntDistribution
from optuna.trial import FrozenTrial, TrialState, create_trial

from tests.search.helpers import ask_move
from tuner.search.bracket import bracket_plan, halfway_value
from tuner.search.coord import FLAT, _key
from tuner.search.coord_polish import CoordPolishSampler
from tuner.search.planned import sla_feasible

DISTS = {
    "method": CategoricalDistribution(["dflash", "ngram"]),
    "kv": CategoricalDistribution(["auto", "fp8"]),
    "policy": CategoricalDistribution(["fcfs", "priority"]),  # a minor knob: may differ within a setting
    "draft": IntDistribution(1, 16, log=True),
    "seqs": IntDistribution(16, 1024, log=True),
}
MINOR = frozenset({"policy"})


def _trial(draft: int, value: float, method: str = "dflash", kv: str = "fp8", policy: str = "fcfs",
           seqs: int = 256) -> FrozenTrial:
    params = {"method": method, "kv": kv, "policy": policy, "draft": draft, "seqs": seqs}
    return create_trial(params=params, distributions=DISTS, value=value, constraints={"sla": -0.1})


def _plan(told: list[FrozenTrial]) -> tuple[str, Any, dict[str, Any]] | None:
    best = max((t for t in told if t.values and sla_feasible(t)), key=lambda t: t.values[0])
    return bracket_plan(told, best, {_key(t.params) for t in told}, _key, FLAT, MINOR)


def test_a_peak_between_tried_values_is_split_on_the_log_scale() -> None:
    """Dynamic's traced miss: draft 1, 4 and 16 read 0.64, 0.93, 0.947; the parabola's top lies between 4 and 16,
    so the move is their geometric middle, 8. A trial of 8 in another setting (two levers apart) does not count
    here; one a lever apart does (below), and 15 merges with 16."""
    told = [_trial(1, 0.64), _trial(4, 0.93, kv="auto"), _trial(16, 0.947, policy="priority"),
            _trial(15, 0.7), _trial(8, 0.5, method="ngram", kv="auto")]
    found = _plan(told)
    assert found is not None
    name, value, plan = found
    assert (name, value) == ("draft", 8), found
    assert plan == {**told[2].params, "draft": 8}
    assert _plan([*told, _trial(8, 0.5, method="ngram")]) is None  # one lever apart: 8 counts as tried


def test_no_move_without_a_top_three_values_or_a_new_value() -> None:
    # rising ever faster (convex): the top is at the range's end, which the ordinary moves reach
    assert _plan([_trial(1, 0.5), _trial(4, 0.6), _trial(16, 0.95)]) is None
    # two values only
    assert _plan([_trial(4, 0.93), _trial(16, 0.947)]) is None
    # the setting differs (ngram and KV cache auto): its trials are not this setting's profile
    assert _plan([_trial(1, 0.64, method="ngram", kv="auto"), _trial(4, 0.93), _trial(16, 0.947)]) is None
    # the gap 8-16 is one x2 step: splitting it would land about a tried value
    assert _plan([_trial(2, 0.7), _trial(8, 0.99), _trial(16, 1.0)]) is None
    # the peak is flat (< FLAT of predicted gain): no move
    assert _plan([_trial(1, 0.990), _trial(4, 0.995), _trial(16, 0.996)]) is None
    # the least-squares parabola reads the incumbent (1.0 at 4) low; its top, between 4 and 16, is not above 1.0
    assert _plan([_trial(1, 0.6), _trial(2, 0.8), _trial(4, 1.0), _trial(16, 0.85)]) is None


def _next_move(bracket: bool | str, told: list[FrozenTrial],
               recorded: dict[int, tuple[tuple[str, Any], float, int, Any]]) -> tuple[str, Any] | None:
    """The sampler's next move from `told`; `recorded`: moves as the sampler records those it made, by trial number:
    ((knob, value), the objective it moved from, the trial it moved from, the knob's value there)."""
    sampler = CoordPolishSampler(seed=0, n_startup_trials=0, move_share=1.0, draw_scale=0.0, near_fail=3.0,
                                 flat_interval=False, sweep="none", polish=0, bracket=bracket, minor=MINOR)
    for n, (move, base, start, moved_from) in recorded.items():
        sampler.moves[n], sampler._from[n], sampler._start_of[n], sampler._moved_from[n] = move, base, start, moved_from
    return ask_move(sampler, told, DISTS)


def _first_move(bracket: bool | str, lead: tuple[str, Any] | None = None, moved_from: Any = 4,
                base: float = 0.93) -> tuple[str, Any] | None:
    """The sampler's first move from the told trials below; `lead`: the move that made the incumbent (trial 2),
    from the knob's value `moved_from` and the objective `base` (trial 1's)."""
    told = [_trial(1, 0.64), _trial(4, 0.93), _trial(16, 0.947), _trial(16, 0.6, method="ngram")]
    return _next_move(bracket, told, {2: (lead, base, 1, moved_from)} if lead is not None else {})


def test_the_sampler_makes_the_bracket_move_first_only_when_asked() -> None:
    """With `bracket=True` the next move from the told trials above is draft 8; without it, something else."""
    assert _first_move(True) == ("draft", 8)
    assert _first_move(False) != ("draft", 8)


def test_lead_brackets_only_the_knob_whose_move_made_the_incumbent() -> None:
    """`bracket="lead"` (what `tpe-coord` builds): draft 8 when a draft move (4 -> 16) made the incumbent; not when
    the incumbent came from a draw or from a move of another knob."""
    assert _first_move("lead", ("draft", 16)) == ("draft", 8)
    assert _first_move("lead") != ("draft", 8)
    assert _first_move("lead", ("seqs", 256)) != ("draft", 8)


def test_a_trial_that_failed_or_missed_the_sla_is_not_in_the_profile() -> None:
    told = [_trial(1, 0.64), _trial(4, 0.93), _trial(16, 0.947)]
    told[1] = create_trial(params=told[1].params, distributions=DISTS, value=0.93, constraints={"sla": 0.2})
    assert _plan(told) is None  # two values left: 1 and 16
    failed = create_trial(params=told[0].params | {"draft": 4}, distributions=DISTS, state=TrialState.FAIL)
    assert _plan([*told, failed]) is None


def test_halfway_splits_only_a_coarse_numeric_step() -> None:
    draft, share = IntDistribution(1, 16, log=True), IntDistribution(0, 100)
    assert halfway_value(draft, 3, 12) == 6 and halfway_value(draft, 16, 4) == 8
    assert halfway_value(draft, 8, 15) is None  # a x2 step: nothing to halve
    assert halfway_value(share, 10, 60) == 35 and halfway_value(share, 10, 20) is None
    assert halfway_value(CategoricalDistribution(["a", "b"]), "a", "b") is None


def test_half_tries_the_midpoint_of_the_coarse_move_that_gained() -> None:
    """`bracket="half"` (search44, traced on dynamic seed 551: 3 -> 12 draft tokens gained 3 %, the top was at 6):
    after a coarse move made the incumbent, its midpoint is the next move; not after a move that gained less than
    FLAT, not for an incumbent from a draw, and not for a fine step."""
    assert _first_move("half", ("draft", 16)) == ("draft", 8)
    assert _first_move("half", ("draft", 16), base=0.945) != ("draft", 8)  # +0.2 %: not a gain
    assert _first_move("half") != ("draft", 8)
    assert _first_move("half", ("draft", 16), moved_from=8) != ("draft", 8)  # 8 -> 16 is one x2 step


def _first_move_after_loss(bracket: str, lost_value: float = 0.93, lost_draft: int = 4) -> tuple[str, Any] | None:
    """The sampler's first move when the incumbent (draft 16, 0.947, from a draw) was moved once, to `lost_draft`
    drafts, which scored `lost_value`."""
    told = [_trial(1, 0.64), _trial(16, 0.947), _trial(16, 0.6, method="ngram"), _trial(lost_draft, lost_value)]
    return _next_move(bracket, told, {3: (("draft", lost_draft), 0.947, 1, 16)})


def test_half_loss_contracts_a_coarse_move_that_lost() -> None:
    """`bracket="half-loss"` (search45, traced on dynamic seed 911: an incumbent at 15 draft tokens from a draw, a move
    to 3 lost 6 %, and 8, 5 % above the incumbent, was never tried): the midpoint of a coarse move from the incumbent
    that lost FLAT is the next move; not with "half", not after a move within FLAT, and not after a x2 step."""
    assert _first_move_after_loss("half-loss") == ("draft", 8)
    assert _first_move_after_loss("half") != ("draft", 8)
    assert _first_move_after_loss("half-loss", lost_value=0.945) != ("draft", 8)  # -0.2 %: not a loss
    assert _first_move_after_loss("half-loss", lost_draft=8) != ("draft", 11)  # 16 -> 8 is one x2 step
