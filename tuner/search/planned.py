"""A sampler that decides a whole config before the trial and hands it to Optuna knob by knob.

Why: the samplers that pick a config as a whole (a neighbour of the incumbent, a surrogate's best
candidate) must still go through Optuna's ask/tell, so that storage, resume and dashboards see a normal
trial. Subclasses plan in `before_trial` (`self._plans[trial.number] = {...}`); a knob the plan lacks,
or a planned value outside the trial's distribution, comes from the `fallback` sampler.

Both planners (tuner/search/local_tpe.py, tuner/search/rf_sampler.py) build their plans from neighbours
of good trials, so the neighbour move itself (`movable`, `move`) lives here, one definition for both.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.samplers import BaseSampler
from optuna.study import Study, StudyDirection
from optuna.trial import FrozenTrial, TrialState

LOG_FACTOR = 4.0  # a move on a log-scaled knob multiplies or divides by this
LINEAR_FRACTION = 0.25  # a move on a linear knob shifts by this share of its range
GAP_UNIT = 0.25  # knob_gap: a numeric knob's values this far apart on its [0, 1] scale count as one knob apart


class PlannedSampler(BaseSampler):
    """Hands out `_plans[trial.number]`; asks `fallback` for everything else; seeded `_rng` for planning."""

    def __init__(self, fallback: BaseSampler, seed: int | None) -> None:
        self._fallback = fallback
        self._rng = np.random.RandomState(seed)
        self._plans: dict[int, dict[str, Any]] = {}  # trial number -> planned values

    def reseed_rng(self) -> None:
        self._fallback.reseed_rng()
        self._rng.seed()

    def infer_relative_search_space(self, study: Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        """A planned trial is sampled knob by knob; any other goes to the fallback's own joint
        (multivariate) path, so a multivariate TPE fallback stays multivariate."""
        if trial.number in self._plans:
            return {}
        return self._fallback.infer_relative_search_space(study, trial)

    def sample_relative(self, study: Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        if trial.number in self._plans or not search_space:
            return {}
        return self._fallback.sample_relative(study, trial, search_space)

    def sample_independent(self, study: Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        plan = self._plans.get(trial.number)
        if plan is not None and param_name in plan and param_distribution._contains(
                param_distribution.to_internal_repr(plan[param_name])):
            return plan[param_name]
        return self._fallback.sample_independent(study, trial, param_name, param_distribution)

    def after_trial(self, study: Study, trial: FrozenTrial, state: TrialState,
                    values: Sequence[float] | None) -> None:
        self._plans.pop(trial.number, None)
        self._fallback.after_trial(study, trial, state, values)


def movable(d: BaseDistribution) -> bool:
    """Whether `move` can change a knob of this distribution (more than one choice, or a non-empty range)."""
    if isinstance(d, CategoricalDistribution):
        return len(d.choices) > 1
    return isinstance(d, (IntDistribution, FloatDistribution)) and d.high > d.low


def move(d: BaseDistribution, v: Any, rng: np.random.RandomState) -> Any:
    """A large step away from `v` inside `d`: another choice, x/÷ LOG_FACTOR, or +- LINEAR_FRACTION of the range.

    Large on purpose: what separates a good config from the optimum is one or two knobs at another
    mode or scale (the levers benchmark, tuner/search/local_tpe.py). Draws only from `rng` (the
    sampler's seeded `_rng`), so a seeded sampler makes the same moves.
    """
    if isinstance(d, CategoricalDistribution):
        others = [c for c in d.choices if c != v]
        return others[int(rng.randint(len(others)))]
    assert isinstance(d, (IntDistribution, FloatDistribution))
    up = bool(rng.randint(2))
    if d.log:
        new = v * LOG_FACTOR if up else v / LOG_FACTOR
        if not d.low <= new <= d.high:  # bounce off the end of the range
            new = v / LOG_FACTOR if up else v * LOG_FACTOR
        new = min(max(new, d.low), d.high)
    else:
        step = (d.high - d.low) * LINEAR_FRACTION
        new = v + step if up else v - step
        if not d.low <= new <= d.high:
            new = v - step if up else v + step
        new = min(max(new, d.low), d.high)
    new = on_step(d, new)
    if isinstance(d, IntDistribution):
        new = int(round(new))
        return new if new != v else int(min(max(v + (1 if up else -1), d.low), d.high))
    return float(round(new, 10)) if not math.isnan(new) else v


def on_step(d: IntDistribution | FloatDistribution, v: float) -> float:
    """`v` rounded onto `d`'s step (if it has one) and clamped into its range: a value Optuna accepts."""
    if d.step:
        v = d.low + round((v - d.low) / d.step) * d.step
    return min(max(v, d.low), d.high)


def snap(d: IntDistribution | FloatDistribution, v: float) -> Any:
    """`v` on `d`'s step, in range, as the type Optuna hands out for it (int, or a float rounded to 1e-10)."""
    v = on_step(d, v)
    return int(round(v)) if isinstance(d, IntDistribution) else float(round(v, 10))


def to_unit(d: BaseDistribution, v: Any) -> float:
    """`v`'s position in `d`'s range on [0, 1] (on the log scale for a log knob; 0 for a one-value range)."""
    assert isinstance(d, (IntDistribution, FloatDistribution))
    lo, hi, x = float(d.low), float(d.high), float(v)
    if d.log:
        lo, hi, x = math.log(lo), math.log(hi), math.log(max(x, 1e-300))
    return (x - lo) / (hi - lo) if hi > lo else 0.0


def incumbent(study: Study, done: list[FrozenTrial]) -> FrozenTrial | None:
    """The best SLA-feasible trial among `done` (completed ones), single objective."""
    ok = [t for t in done if t.values and sla_feasible(t)]
    if not ok:
        return None
    return max(ok, key=lambda t: t.values[0]) if study.direction == StudyDirection.MAXIMIZE \
        else min(ok, key=lambda t: t.values[0])


def sla_feasible(t: FrozenTrial) -> bool:
    """Whether a trial met every SLA constraint (SearchCore sets each as (value - limit) / limit: met at
    <= 0); a trial without constraints counts as met."""
    return all(c <= 0 for c in (t.constraints or {}).values())


def knob_gap(d: BaseDistribution | None, a: Any, b: Any) -> float:
    """How many knobs apart two values of one knob count: 1 for different choices, a numeric's step on its [0, 1]
    (log) scale / GAP_UNIT, at most 1 (the distance of `tpe-coord`'s failure risk and of its matched pairs)."""
    if a == b:
        return 0.0
    if isinstance(d, (IntDistribution, FloatDistribution)):
        return min(1.0, abs(to_unit(d, a) - to_unit(d, b)) / GAP_UNIT)
    return 1.0
