"""CoordTPESampler's conditional moves: a parent (a method) moves with its child (a draft length) as one
move, its child is swept before the parent is judged, and parents are read off the told trials."""

from __future__ import annotations

from typing import Any

import optuna

from tuner.search.coord import CoordTPESampler, _children


def knobs(trial: optuna.Trial) -> dict[str, Any]:
    """A method `m` whose `k` exists only under a method (as a draft length does), and two plain knobs."""
    out: dict[str, Any] = {"m": trial.suggest_categorical("m", ["none", "x", "y"])}
    if out["m"] != "none":
        out["k"] = trial.suggest_int("k", 1, 16)
    out["c"] = trial.suggest_categorical("c", ["a", "b"])
    out["f"] = trial.suggest_float("f", 0.8, 0.97, step=0.01)
    return out


def value(p: dict[str, Any]) -> float:
    """c = b doubles; method y doubles only at 3-6 draft tokens (elsewhere it is as good as none)."""
    spec = {"none": 1.0, "x": 1.1, "y": 2.0 if 3 <= p.get("k", 0) <= 6 else 1.0}[p["m"]]
    return (2.0 if p["c"] == "b" else 1.0) * spec


def tell(study: optuna.Study, trial: optuna.trial.Trial, v: float) -> None:
    trial.set_constraint("sla", -0.1)
    study.tell(trial, v)


def seeded(conditional: bool = True, children: str = "model") -> tuple[optuna.Study, CoordTPESampler]:
    """Told: method none at c = a and b (the best: 2.0), method x, and method y at 1-16 tokens with c = a."""
    sampler = CoordTPESampler(seed=0, n_startup_trials=0, move_share=1.0, thompson=False, conditional=conditional,
                              children=children)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    for m, k, c in [("none", None, "a"), ("none", None, "b"), ("x", 4, "a"), ("y", 1, "a"), ("y", 16, "a"),
                    ("y", 4, "a"), ("y", 12, "a"), ("y", 5, "a"), ("y", 2, "a"), ("y", 8, "a")]:
        study.enqueue_trial({"m": m, "c": c, "f": 0.9, **({"k": k} if k else {})})
        t = study.ask()
        tell(study, t, value(knobs(t)))
    return study, sampler


def test_children_are_read_off_the_told_trials() -> None:
    study, _ = seeded()
    told = study.get_trials(deepcopy=False)
    assert _children(told) == {"m": {"k"}}


def test_a_numeric_knob_or_a_one_trial_value_is_no_parent() -> None:
    """Every f value is distinct (so each "always" or "never" comes with k) and c = b is seen once without k:
    neither is read as k's parent; m is, once each side has a value seen twice."""
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=0))
    rows = [("none", None, "b", 0.81), ("none", None, "a", 0.82), ("y", 4, "a", 0.83), ("y", 8, "a", 0.84)]
    for m, k, c, f in rows:
        study.enqueue_trial({"m": m, "c": c, "f": f, **({"k": k} if k else {})})
        t = study.ask()
        study.tell(t, value(knobs(t)))
    assert _children(study.get_trials()) == {"m": {"k"}}
    study.enqueue_trial({"m": "none", "c": "a", "f": 0.85})  # now c = a has trials with and without k
    t = study.ask()
    study.tell(t, value(knobs(t)))
    assert _children(study.get_trials()) == {"m": {"k"}}
    assert _children(study.get_trials()[:3]) == {}  # y seen once: no side with two trials holding k


def test_switching_a_parent_on_sets_its_child_by_the_model() -> None:
    """The first move is m: none -> y on the best trial, with k where the told y trials paid (4, not 1 or 16),
    every other knob as the best trial has it."""
    study, sampler = seeded()
    trial = study.ask()
    p = knobs(trial)
    assert sampler.moves[trial.number] == ("m", "y")
    assert 3 <= p["k"] <= 6, p
    assert (p["c"], p["f"]) == ("b", 0.9)


def test_the_parent_is_judged_only_after_its_child_sweep() -> None:
    """A parent move that changed nothing is not 'flat' until the next move, a sweep of its child (only k
    changes, from the parent move's trial), is told; it is flat then only if the sweep changed nothing too.
    The same whether the move's child was drawn by TPE (the default) or set by the model."""
    for sweep_value, flat, children in [(2.0, True, "tpe"), (4.0, False, "tpe"), (2.0, True, "model")]:
        study, sampler = seeded(children=children)
        move = study.ask()
        mp = knobs(move)
        tell(study, move, 2.0)  # as if the draft length had been a bad one: no better than the centre
        assert "m" not in sampler._flat(study.get_trials())
        sweep = study.ask()
        sp = knobs(sweep)
        assert sampler._sweep_of[sweep.number] == move.number
        assert {k for k in sp if sp[k] != mp[k]} == {"k"}, (mp, sp)
        assert "m" not in sampler._flat(study.get_trials())  # the sweep is not told yet
        tell(study, sweep, sweep_value)
        assert ("m" in sampler._flat(study.get_trials())) is flat


def test_without_conditional_moves_the_child_is_not_planned() -> None:
    """conditional=False (the benchmark's tpe-coord-v1, the sampler before this change): the move plans no k,
    so TPE draws it, and no sweep follows."""
    study, sampler = seeded(conditional=False)
    trial = study.ask()
    knobs(trial)
    assert sampler.moves[trial.number] == ("m", "y")
    assert not sampler._sweeps
