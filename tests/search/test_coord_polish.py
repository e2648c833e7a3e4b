"""CoordPolishSampler (tuner/search/coord_polish.py): failure risk near the whole config, the Thompson draw's
scale, the budget-aware polish phase and the sweep values of numeric moves."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import numpy as np
import optuna

from tests.search.helpers import mixed_knobs
from tuner.search.coord import CoordTPESampler, _Additive, _told
from tuner.search.coord_polish import CoordPolishSampler
from tuner.search.support import Support

CENTRE = {"c": "a", "n": 64, "f": 0.85, "p": 2, "b": True}


def _told_study(
    sampler: optuna.samplers.BaseSampler, rows: list[tuple[dict[str, Any], float | None]]
) -> optuna.Study:
    """A study told `rows` (config, objective; None: the launch failed), every finished trial SLA-feasible."""
    study = optuna.create_study(direction="maximize", sampler=sampler)
    for params, value in rows:
        study.enqueue_trial(params)
        t = study.ask()
        mixed_knobs(t)
        if value is None:
            study.tell(t, state=optuna.trial.TrialState.FAIL)
        else:
            t.set_constraint("sla", -0.1)
            study.tell(t, value)
    return study


def _rows() -> list[tuple[dict[str, Any], float | None]]:
    """Five good trials around CENTRE with c = "a"; c = "b" seen once only, in a trial that failed for its memory
    share (f = 0.97, with every other knob away from the centre); two more failures at f = 0.97 near the centre."""
    return [
        (CENTRE, 10.0),
        ({**CENTRE, "n": 128}, 9.0),
        ({**CENTRE, "p": 3}, 9.5),
        ({**CENTRE, "b": False}, 9.8),
        ({**CENTRE, "n": 32}, 8.0),
        ({"c": "b", "n": 1024, "f": 0.97, "p": 4, "b": False}, None),
        ({**CENTRE, "f": 0.97}, None),
        ({**CENTRE, "f": 0.97, "p": 3}, None),
    ]


def _risk(sampler: CoordTPESampler, study: optuna.Study, name: str, new: Any) -> float:
    told = [t for t in study.get_trials(deepcopy=False) if _told(t)]
    model = _Additive(told)
    d = told[0].distributions[name]
    return sampler._fail_risk(model, dict(CENTRE), {**CENTRE, name: new}, name, d, CENTRE[name], new)


def test_a_value_seen_only_in_a_trial_that_failed_elsewhere_is_not_blamed() -> None:
    """c = "b" failed once, in a trial far from the centre: the per-value share (tpe-coord) blames it (1/2 of
    its trials failed, against 2/8 for "a"), the risk near the whole config (width 3, as chosen) hardly at all;
    a memory share that failed next to the centre stays risky."""
    plain = CoordTPESampler(seed=0)
    near = CoordPolishSampler(seed=0, near_fail=3.0)
    study = _told_study(plain, _rows())
    assert _risk(plain, study, "c", "b") >= 0.2
    assert abs(_risk(near, study, "c", "b")) < 0.02
    assert _risk(near, study, "f", 0.97) > 0.1


def test_draw_scale_zero_is_the_posterior_mean() -> None:
    """The Thompson draw's covariance times 0 is the mean fit; times 1 it moves the coefficients."""
    study = _told_study(CoordTPESampler(seed=0), _rows())
    told = [t for t in study.get_trials(deepcopy=False) if _told(t)]
    mean = _Additive(told).beta
    assert np.allclose(_Additive(told, rng=np.random.RandomState(1), scale=0.0).beta, mean, atol=1e-4)
    assert not np.allclose(_Additive(told, rng=np.random.RandomState(1), scale=1.0).beta, mean, atol=1e-4)


def test_the_last_trials_of_the_budget_are_all_moves() -> None:
    """With no moves otherwise (move_share 0), the last `polish` launched trials of the budget are single-knob
    moves of the incumbent, and only those; a numeric move may take a sweep point beyond the ordinary steps."""
    sampler = CoordPolishSampler(
        seed=3, n_startup_trials=4, move_share=0.0, budget=14, polish=5, sweep="polish"
    )
    study = optuna.create_study(direction="maximize", sampler=sampler)
    for i in range(14):
        t = study.ask()
        p = mixed_knobs(t)
        t.set_constraint("sla", -0.1)
        study.tell(t, (2.0 if p["c"] == "b" else 1.0) * p["n"] ** 0.5 + 0.01 * i)
    assert sorted(sampler.moves) == list(range(9, 14))
    values = sampler._move_values(study.trials[0].distributions["p"], 2)
    assert set(values) >= {1, 3, 4}  # sweep points of 1-4 (the polish is on at the end)


def test_ties_of_told_trials_mark_the_categoricals_they_differ_in_flat() -> None:
    """Two told trials that tie within 1 % and differ only in `b` (and a numeric step under 1/8 of its range)
    mark `b` flat with `pair_flat`, without any move of it; a tie that differs in more knobs than `pair_flat`,
    or a pair 5 % apart, marks nothing; `pair_flat` 0 (tpe-coord-nf) marks nothing either."""
    rows: list[tuple[dict[str, Any], float | None]] = [
        (CENTRE, 10.0),
        ({**CENTRE, "b": False, "f": 0.86}, 10.02),  # tie: b (and f by 1/17 of its range)
        ({**CENTRE, "c": "b"}, 9.5),  # 5 % apart: c matters
        ({**CENTRE, "c": "c", "n": 512, "p": 4}, 10.0),  # tie, but 3 knobs differ
    ]
    paired = CoordPolishSampler(seed=0, pair_flat=2)
    study = _told_study(paired, rows)
    trials = study.get_trials(deepcopy=False)
    assert set(paired._flat(trials)) == {"b"}
    assert set(CoordPolishSampler(seed=0, pair_flat=3)._flat(trials)) == {"b", "c"}
    assert CoordPolishSampler(seed=0)._flat(trials) == {}


def test_a_knob_flat_from_a_tie_is_moved_last() -> None:
    """The incumbent ties with a trial that differs in `b` and a step of `n`: with `pair_flat` (tpe-coord-pf)
    `b`'s move comes after every other single-knob move of the incumbent; without it, within the first four."""
    rows: list[tuple[dict[str, Any], float | None]] = [
        (CENTRE, 10.0),
        ({**CENTRE, "b": False, "n": 128}, 10.0),
        ({**CENTRE, "c": "b", "n": 128, "p": 3}, 6.0),
        ({**CENTRE, "c": "c", "n": 32, "f": 0.9}, 7.0),
    ]
    for pair_flat, first, last in ((4, 12, 12), (0, 0, 3)):
        for seed in range(5):
            sampler = CoordPolishSampler.chosen(seed=seed, pair_flat=pair_flat)
            study = _told_study(sampler, rows)
            order = []
            for k in range(1000, 1030):  # plans only (kept as planned, so each move is planned once)
                plan = sampler._best_move(study, SimpleNamespace(number=k))  # type: ignore[arg-type]
                if plan is None:
                    break
                sampler._plans[k] = plan
                order.append(sampler.moves[k][0])
            assert len(order) == 13
            assert first <= order.index("b") <= last, (pair_flat, seed, order)


def _confounded_rows() -> list[tuple[dict[str, Any], float | None]]:
    """Good trials around CENTRE (c = "a"); `b` False tried next to it (a matched pair: worse); c = "b" and "c"
    seen only in trials far from it in every other knob (their claims confounded with those knobs)."""
    return [
        (CENTRE, 10.0),
        ({**CENTRE, "n": 128}, 9.9),
        ({**CENTRE, "p": 3}, 10.0),
        ({**CENTRE, "b": False}, 8.0),
        ({"c": "b", "n": 16, "f": 0.95, "p": 4, "b": False}, 5.0),
        ({"c": "b", "n": 1024, "f": 0.80, "p": 1, "b": False}, 5.5),
        ({"c": "c", "n": 300, "f": 0.90, "p": 4, "b": False}, 5.0),
    ]


def test_a_value_seen_only_far_from_the_centre_is_untested_and_a_matched_pair_tests_one() -> None:
    """c = "b" was only told in trials that differ from every c = "a" trial in 3+ other knobs: untested; b = False
    differs from CENTRE in `b` alone: tested (supported), as is p = 3; a knob known flat does not break a pair."""
    study = _told_study(CoordTPESampler(seed=0), _confounded_rows())
    told = [t for t in study.get_trials(deepcopy=False) if _told(t)]
    d = told[0].distributions
    support = Support(_Additive(told, centre=CENTRE, width=4.0), CENTRE, 1.0)
    assert not support.tested("c", d["c"], "b")
    assert not support.tested("c", d["c"], "c")
    assert support.tested("b", d["b"], False)
    assert support.tested("p", d["p"], 3)
    # b = False against the three b = True trials within one other knob (CENTRE, n = 128, p = 3): their mean
    pairs = [math.log(8.0 / 10.0), math.log(8.0 / 9.9), math.log(8.0 / 10.0)]
    assert abs(support.contrast("b", d["b"], True, False) - sum(pairs) / 3) < 1e-9
    assert support.contrast("c", d["c"], "a", "b") is None  # no pair at both values
    # (c="b", n=16 ...) vs (c="b", n=1024 ...) differ in n, f, p only: with those known flat they test nothing
    # about c (both at "b"), but (c="c", ...) vs (b=False at CENTRE) then differs in c, n, f, p, c alone counting
    flat = Support(_Additive(told, centre=CENTRE, width=4.0), CENTRE, 1.0, flat={"n", "f", "p"})
    assert flat.tested("c", d["c"], "c")


def test_an_untested_categorical_move_comes_before_a_supported_negative_one() -> None:
    """The model reads c -> "b" / "c" as losses (every such trial was far away and bad) and b -> False too (a
    matched pair). With `untested` a c move is planned first and both come before b -> False, for every seed; without it (as
    `tpe-coord-nf`) neither c move is among the first eight; b -> False comes after the c moves either way."""
    for untested, seed in ((2.0, s) for s in range(5)):
        sampler = CoordPolishSampler.chosen(seed=seed, untested=untested, untested_cats=True)
        study = _told_study(sampler, _confounded_rows())
        order = []
        for k in range(1000, 1012):
            plan = sampler._best_move(study, SimpleNamespace(number=k))  # type: ignore[arg-type]
            if plan is None:
                break
            sampler._plans[k] = plan
            order.append(sampler.moves[k])
        assert order[0][0] == "c", (seed, order)
        last_c = max(order.index(("c", "b")), order.index(("c", "c")))
        assert ("b", False) not in order[: last_c + 1], (seed, order)
    for seed in range(5):
        sampler = CoordPolishSampler.chosen(seed=seed)
        study = _told_study(sampler, _confounded_rows())
        order = []
        for k in range(1000, 1008):
            plan = sampler._best_move(study, SimpleNamespace(number=k))  # type: ignore[arg-type]
            sampler._plans[k] = plan
            order.append(sampler.moves[k][0])
        assert "c" not in order, (seed, order)
