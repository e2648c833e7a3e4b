"""tpe-local (the default before search39): TPE plus neighbour moves around the best SLA-feasible trial."""

from __future__ import annotations

import optuna

from tests.search.helpers import core_for, make_study, mixed_knobs, synthetic
from tuner.search.local_tpe import LocalTPESampler
from tuner.search.searcher import make_sampler
from tuner.search.space import build_space


def _incumbent(study: optuna.Study) -> optuna.trial.FrozenTrial | None:
    ok = [t for t in study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
          if all(v <= 0 for v in t.constraints.values())]
    return max(ok, key=lambda t: t.value) if ok else None


def test_every_third_guided_trial_is_a_one_or_two_knob_neighbour_of_the_feasible_incumbent() -> None:
    sampler = LocalTPESampler(seed=3, n_startup_trials=4)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    local = 0
    for i in range(24):
        best = _incumbent(study)
        trial = study.ask()
        params = mixed_knobs(trial)
        if trial.number in sampler._plans:
            local += 1
            assert best is not None and i >= 4
            changed = [k for k in params if params[k] != best.params[k]]
            assert 1 <= len(changed) <= 2, (params, best.params)
            for k in changed:  # a large step, not a nudge
                if k == "n":
                    assert max(params[k], best.params[k]) / min(params[k], best.params[k]) >= 3.9
                if k == "f":
                    assert abs(params[k] - best.params[k]) >= 0.04 - 1e-9
        value = params["n"] * (2.0 if params["c"] == "b" else 1.0)
        trial.set_constraint("sla", 1.0 if params["n"] > 600 else -0.5)  # the largest n break the SLA
        study.tell(trial, value)
    assert 5 <= local <= 8  # about a third of the 20 trials after the startup


def test_an_infeasible_best_is_never_the_incumbent() -> None:
    sampler = LocalTPESampler(seed=0, n_startup_trials=2)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    for params, value, violation in [({"c": "a", "n": 1000, "f": 0.9, "p": 1, "b": True}, 1e6, 0.5),
                                     ({"c": "b", "n": 32, "f": 0.9, "p": 2, "b": False}, 10.0, -0.1)]:
        study.enqueue_trial(params)
        t = study.ask()
        mixed_knobs(t)
        t.set_constraint("sla", violation)
        study.tell(t, value)
    local = 0
    for _ in range(4):
        t = study.ask()
        params = mixed_knobs(t)
        if t.number in sampler._plans:
            local += 1
            assert sum(params[k] != v for k, v in {"c": "b", "n": 32, "f": 0.9, "p": 2, "b": False}.items()) <= 2
        study.tell(t, 1.0)
    assert local >= 1


def test_tpe_local_searches_through_the_core() -> None:
    study = make_study(search={"algorithm": "tpe-local", "n_startup_trials": 4})
    assert study.search.algorithm == "tpe-local"
    assert isinstance(make_sampler(study, build_space(study)), LocalTPESampler)
    core, space = core_for(study)
    seen = set()
    for _ in range(16):
        cfg = core.ask()
        assert cfg is not None
        key = tuple(sorted(cfg.args.items()))
        assert key not in seen  # the searcher's duplicate check still holds with neighbour moves
        seen.add(key)
        core.tell(cfg.number, synthetic(space, cfg))
    assert any(h["feasible"] for h in core.history)


def test_multivariate_fallback_samples_unplanned_trials_jointly_and_planned_ones_by_knob() -> None:
    """With `multivariate=True` every guided trial that is not a neighbour move goes through TPE's joint
    (relative) path over all knobs; a neighbour move through none of it (its values are the plan's).
    Before PlannedSampler passed the relative path on, a multivariate fallback was silently univariate."""
    sampler = LocalTPESampler(seed=1, n_startup_trials=4, multivariate=True)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    joint = planned = 0
    for i in range(16):
        trial = study.ask()
        space = sampler.infer_relative_search_space(study, trial)
        if trial.number in sampler._plans:
            planned += 1
            assert space == {}
        elif i >= 5:  # guided: TPE's joint space holds every knob seen in the completed trials
            joint += 1
            assert set(space) == {"c", "n", "f", "p", "b"}, space
        params = mixed_knobs(trial)
        trial.set_constraint("sla", -0.5)
        study.tell(trial, params["n"] * (2.0 if params["c"] == "b" else 1.0))
    assert planned >= 2 and joint >= 5


def test_branch_moves_switch_one_parent_knob_and_leave_its_children_to_tpe() -> None:
    """With `parents` and `branch_every=2`, every second neighbour move changes exactly the parent knob
    (`c`, which switches `p` on only for "a") and copies the rest; the others stay ordinary moves."""
    sampler = LocalTPESampler(seed=2, n_startup_trials=4, multivariate=True, parents=["c"], branch_every=2)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    branch = 0
    for _ in range(30):
        best = _incumbent(study)
        trial = study.ask()
        plan = dict(sampler._plans.get(trial.number, {}))
        c = trial.suggest_categorical("c", ["a", "b", "c"])
        params = {"c": c, "n": trial.suggest_int("n", 16, 1024, log=True),
                  "f": trial.suggest_float("f", 0.8, 0.97, step=0.01)}
        if c == "a":
            params["p"] = trial.suggest_int("p", 1, 4)
        if plan and best is not None and sampler._moves % 2 == 0:
            branch += 1
            assert params["c"] != best.params["c"]
            assert all(params[k] == best.params[k] for k in ("n", "f")), (params, best.params)
        trial.set_constraint("sla", -0.5)
        study.tell(trial, params["n"] * (3.0 if c == "b" else 1.0))
    assert branch >= 2
