"""`tpe-coord` options of search41: rotation (a categorical knob whose moves from near here did not pay waits for the
others) and relief (a move that ran out of memory is retried with the memory knobs lower)."""

from __future__ import annotations

import optuna
from optuna.trial import TrialState

from tests.search.helpers import lever_value, mixed_knobs, tell_lever_start, tell_moves
from tuner.search.attrs import A_OUTCOME
from tuner.search.coord_polish import CoordPolishSampler
from tuner.trial.outcome import TrialOutcome


def _moves(rotate: float, n: int = 10) -> list[tuple[str, object]]:
    """The told start says c -> "b" doubles the objective; here c = "a" is best and every other c loses 20 %."""
    sampler = CoordPolishSampler(seed=0, n_startup_trials=0, move_share=1.0, draw_scale=0.0, near_fail=3.0,
                                 untested=1.0, flat_interval=False, sweep="none", polish=0, rotate=rotate,
                                 rotate_near=4.0, rotate_cats=True)
    told = tell_moves(sampler, n, lambda p: (3.0 if p["b"] is False else 1.0) * (1.0 if p["c"] == "a" else 0.8))
    return [move for _, move in told if move is not None]


def test_a_categorical_move_that_lost_pushes_the_knobs_next_move_back() -> None:
    """Without rotation the model, misled by the start, moves c twice in five moves (both lose); with it the second
    move of c waits until every numeric knob has been moved."""
    plain = [k for k, _ in _moves(0.0)]
    assert plain[:5].count("c") == 2, plain
    rotated = [k for k, _ in _moves(1.0)]
    first = rotated.index("c")
    assert "c" not in rotated[first + 1:first + 6], rotated
    assert {"n", "f", "p"} <= set(rotated[first + 1:]), rotated


def test_only_moves_that_did_not_improve_count() -> None:
    """A move that beat its start is a direction to go on in (16 -> 8 -> 4 draft tokens): it adds no penalty."""
    sampler = CoordPolishSampler(seed=0, n_startup_trials=0, move_share=1.0, draw_scale=0.0, rotate=1.0,
                                 rotate_near=4.0, flat_interval=False, sweep="none", polish=0)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    tell_lever_start(study)
    trial = study.ask()
    params = mixed_knobs(trial)
    trial.set_constraint("sla", -0.1)
    study.tell(trial, 100.0)  # far above the start's 3
    told = study.get_trials(deepcopy=False)[-1]
    assert told.state == TrialState.COMPLETE and sampler._improved(told), params
    sampler._flat(study.get_trials(deepcopy=False))
    assert sampler._launched_moves == []


def _relief_run(relief: frozenset[str], n: int = 8) -> tuple[list[dict[str, object]], list[int]]:
    """c -> "b" pays (the start's lever) but runs out of memory unless n <= 20: each guided trial's params, and
    the positions of the OOM trials."""
    sampler = CoordPolishSampler(seed=0, n_startup_trials=0, move_share=1.0, draw_scale=0.0, near_fail=3.0,
                                 flat_interval=False, sweep="none", polish=0, relief=relief)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    tell_lever_start(study)
    out, ooms = [], []
    for i in range(n):
        trial = study.ask()
        params = mixed_knobs(trial)
        out.append(params)
        if params["c"] == "b" and params["n"] > 20:
            trial.set_user_attr(A_OUTCOME, TrialOutcome.OOM.value)
            study.tell(trial, state=TrialState.FAIL)
            ooms.append(i)
            continue
        trial.set_constraint("sla", -0.1)
        study.tell(trial, lever_value(params))
    return out, ooms


def test_a_move_that_ran_out_of_memory_is_retried_with_the_memory_knobs_lower() -> None:
    """With relief the OOM move c -> "b" is launched again right away with n / 4 and f - 1/4 of its range (and then
    pays); without it c = "b" is never run again in the trials that follow."""
    plain, ooms = _relief_run(frozenset())
    assert ooms, plain
    assert not any(p["c"] == "b" and p["n"] <= 20 for p in plain[ooms[0] + 1:]), plain
    relieved, ooms = _relief_run(frozenset({"n", "f"}))
    nxt, failed = relieved[ooms[0] + 1], relieved[ooms[0]]
    assert nxt["c"] == "b" and nxt["n"] == failed["n"] // 4 and nxt["b"] == failed["b"], (failed, nxt)
    assert abs(nxt["f"] - (failed["f"] - 0.0425)) <= 0.006, (failed, nxt)
