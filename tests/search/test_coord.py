"""CoordTPESampler (the benchmark's `coord`): designed start, single-knob moves ranked by a main-effects model."""

from __future__ import annotations

import collections
import math

import optuna

from tests.search.helpers import lever_value, make_study, mixed_knobs, synthetic, tell_lever_start
from tuner.search.coord import CoordTPESampler
from tuner.search.searcher import SearchCore, make_sampler
from tuner.search.space import build_space
from tuner.trial.outcome import TrialOutcome


def test_designed_start_tries_every_choice_and_every_stratum() -> None:
    """9 start trials: each of c's 3 choices 3 times, b's both choices, n once in each ninth of its log range."""
    sampler = CoordTPESampler(seed=4, n_startup_trials=9, designed=True)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    rows = []
    for _ in range(9):
        trial = study.ask()
        rows.append(mixed_knobs(trial))
        study.tell(trial, 1.0)
    assert collections.Counter(r["c"] for r in rows) == {"a": 3, "b": 3, "c": 3}
    assert {r["b"] for r in rows} == {True, False}
    strata = sorted(int(9 * math.log(r["n"] / 16) / math.log(1024 / 16) - 1e-9) for r in rows)
    assert strata == list(range(9)), strata


def test_a_move_changes_exactly_one_knob_and_the_first_is_the_lever_that_paid() -> None:
    """Told data where c = "b" doubles the objective and the best trial (b = False, x3) has c = "a": with every guided
    trial a move, the first move is c -> "b" on the best trial, and every move changes one knob only."""
    sampler = CoordTPESampler(seed=0, n_startup_trials=0, move_share=1.0, thompson=False)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    tell_lever_start(study)
    first = None
    for _ in range(8):
        best = max((t for t in study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))),
                   key=lambda t: t.value)
        trial = study.ask()
        params = mixed_knobs(trial)
        assert trial.number in sampler.moves
        changed = [k for k in params if params[k] != best.params[k]]
        assert len(changed) == 1, (params, best.params)
        first = first or sampler.moves[trial.number]
        trial.set_constraint("sla", -0.1)
        study.tell(trial, lever_value(params))
    assert first == ("c", "b")


def test_searches_through_the_core_with_constraints_and_failures() -> None:
    """Through SearchCore (baseline, repairs, feasibility model, dedup) on a surface with an OOM region and
    SLA misses: every launch is new, failures are told as FAIL, and a feasible incumbent is found."""
    study = make_study(search={"algorithm": "tpe-coord", "n_startup_trials": 8})
    space = build_space(study)
    sampler = make_sampler(study, space)
    assert isinstance(sampler, CoordTPESampler) and sampler.n_startup_trials == 6  # capped at COORD_STARTUP
    core = SearchCore(study, space, sampler=sampler)
    seen, outcomes = set(), collections.Counter()
    for _ in range(24):
        cfg = core.ask()
        assert cfg is not None
        key = tuple(sorted(cfg.args.items()))
        assert key not in seen
        seen.add(key)
        r = synthetic(space, cfg)
        outcomes[r.outcome] += 1
        core.tell(cfg.number, r)
    assert outcomes[TrialOutcome.OOM] >= 1 and any(h["feasible"] for h in core.history)
    assert len(sampler.moves) >= 5  # half the guided trials are single-knob moves
    failed = core.optuna.get_trials(states=(optuna.trial.TrialState.FAIL,))
    assert any(t.user_attrs.get("servetune.outcome") == "oom" for t in failed)
