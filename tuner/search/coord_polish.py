"""`tpe-coord` with a budget-aware polish phase and finer numeric moves (`CoordPolishSampler`).

Why (docs/search.md, issue 19): `tpe-coord`'s misses end one knob away from the >= 95 % set (a draft
length at 12 where 8 pays, the KV cache not FP8, speculative decoding off), with moves left unspent or
spent on flat knobs:

- **Polish**: the last `polish` launched trials of a `budget`-trial study are all single-knob moves of the
  incumbent (no TPE draws), so every lever gets its try in the incumbent's context before the budget ends.
- **Sweep values**: a numeric move may also go to 9 evenly spaced points of the knob's (log) range, not only
  x or / 4 and 2 (log) or +- 1/4 and 1/8 of the range (linear): from 12 of 1-16 those steps reach 8 only
  through a flat 14 or 16 first. The model ranks the values, as before.
- **Flat by interval**: a numeric move that changed the objective by < FLAT marks only the values between
  the two ends as flat (a step from 12 to 14 says nothing about 8); other values of the knob get half the
  penalty (after knobs never tried flat, before a known flat stretch). Categoricals as before.

It reads only the told trials, Optuna's distributions and the study's trial budget.
"""

from __future__ import annotations

import math
from typing import Any

from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.study import Study
from optuna.trial import TrialState

from tuner.search.attrs import A_DUPLICATE, A_REJECTED
from tuner.search.coord import FLAT_PENALTY, CoordTPESampler, _Additive, _from_unit, _neighbours, _told
from tuner.search.planned import to_unit

COVER = (
    10.0  # polish with `cover`: penalty per earlier move of the knob from the same start (beyond any gain)
)
SWEEP_POINTS = 9  # evenly spaced values of a numeric range a move may take (with the ordinary steps)


class CoordPolishSampler(CoordTPESampler):
    """CoordTPESampler whose last `polish` trials of `budget` are all moves, with sweep values for numeric
    knobs (`sweep`: "always", "polish" (only then) or "none") and flatness by interval (`flat_interval`)."""

    def __init__(
        self,
        *,
        budget: int | None = None,
        polish: int = 8,
        sweep: str = "always",
        flat_interval: bool = True,
        near_fail: float = 0.0,
        cover: bool = False,
        **kw: Any,
    ) -> None:
        super().__init__(**kw)
        self.budget, self.polish, self.sweep, self.flat_interval = budget, polish, sweep, flat_interval
        self.near_fail = (
            near_fail  # > 0: failure risk from the told trials near the whole config (this width)
        )
        self.cover = cover  # in the polish: a knob already moved from this start goes after every other knob
        self._polishing = False

    def _move_due(self, study: Study) -> bool:
        if not self.budget or self.polish <= 0:
            return False
        launched = sum(
            1
            for t in study.get_trials(deepcopy=False)
            if t.state != TrialState.FAIL
            or (A_REJECTED not in t.user_attrs and A_DUPLICATE not in t.user_attrs)
        )
        # the trial being planned is counted among `launched` already (it is RUNNING)
        self._polishing = launched > self.budget - self.polish
        return self._polishing

    def _move_values(self, d: BaseDistribution, v: Any) -> list[Any]:
        out = _neighbours(d, v)
        if (
            isinstance(d, CategoricalDistribution)
            or self.sweep == "none"
            or (self.sweep == "polish" and not self._polishing)
        ):
            return out
        assert isinstance(d, (IntDistribution, FloatDistribution))
        for i in range(SWEEP_POINTS):
            x = _from_unit(d, i / (SWEEP_POINTS - 1))
            if x != v and x not in out:
                out.append(x)
        return out

    def _fail_risk(
        self,
        model: _Additive,
        here: dict[str, Any],
        plan: dict[str, Any],
        name: str,
        d: BaseDistribution,
        old: Any,
        v: Any,
    ) -> float:
        """With `near_fail`: the failure share of the told trials weighted by exp(-distance to the whole
        config / near_fail) (one success as prior), plan less start. A value seen only in a trial that failed
        for another knob (memory 0.97 with DFlash) is not blamed as the per-value share blames it."""
        if self.near_fail <= 0:
            return super()._fail_risk(model, here, plan, name, d, old, v)
        return _near_failed(model, plan, self.near_fail) - _near_failed(model, here, self.near_fail)

    def _flat_penalty(
        self, flat: dict[str, list[tuple[Any, Any]]], name: str, d: BaseDistribution, old: Any, v: Any
    ) -> float:
        base = 0.0
        if self.cover and self._polishing:
            base = COVER * sum(
                1 for n, (k, _) in self.moves.items() if k == name and self._start_of.get(n) == self._start
            )
        return base + self._flat_only(flat, name, d, v)

    def _flat_only(
        self, flat: dict[str, list[tuple[Any, Any]]], name: str, d: BaseDistribution, v: Any
    ) -> float:
        moves = flat.get(name)
        if not moves:
            return 0.0
        if not self.flat_interval or isinstance(d, CategoricalDistribution):
            return FLAT_PENALTY
        assert isinstance(d, (IntDistribution, FloatDistribution))
        u = to_unit(d, v)
        for a, b in moves:
            if a is None:
                return FLAT_PENALTY
            lo, hi = sorted((to_unit(d, a), to_unit(d, b)))
            if lo - 1e-9 <= u <= hi + 1e-9:
                return FLAT_PENALTY
        return FLAT_PENALTY / 2


def _distance(dists: dict[str, BaseDistribution], a: dict[str, Any], b: dict[str, Any]) -> float:
    """Knobs two configs differ in: 1 per categorical or presence difference, a numeric's |unit step| / 0.25
    (at most 1)."""
    out = 0.0
    for k in set(a) | set(b):
        if k not in a or k not in b:
            out += 1.0
            continue
        d = dists.get(k)
        if isinstance(d, (IntDistribution, FloatDistribution)):
            out += min(1.0, abs(to_unit(d, a[k]) - to_unit(d, b[k])) / 0.25)
        else:
            out += float(a[k] != b[k])
    return out


def _near_failed(model: _Additive, params: dict[str, Any], width: float) -> float:
    """Share of failed told trials, weighted by closeness to `params`, with one success as prior."""
    num, den = 0.0, 1.0
    for t in model.told:
        if _told(t):
            w = math.exp(-_distance(model.dists, params, t.params) / width)
            num, den = num + w * (t.state == TrialState.FAIL), den + w
    return num / den
