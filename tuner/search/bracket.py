"""A parabolic step along one numeric knob of the incumbent (`tpe-coord`'s bracket move, issue 19, search43).

Why: traced misses of `tpe-coord` end with the draft length at 15, with told DFlash trials at 1, 4 and 15
(0.64, 0.93, 0.947 of the optimum) and nothing in between. A parabola in log k through those three peaks near
8, but the search's model cannot say so: its x and x^2 are shared by every speculative method, under a ridge,
so the curvature a peak needs is flattened, and the x/2 move ranks below moves of knobs the model knows little
about. One-dimensional searches answer this with successive parabolic interpolation (Brent): fit a parabola
through the best point and its tried neighbours and try near its top.

The profile of a knob is read near the incumbent: the SLA-feasible told trials with the same knobs present and at
most SETTING categorical values different (the space's minor knobs aside), each point moved to the incumbent's other
knobs by the search's additive model (a partial residual: a trial one lever apart, quantisation off, would otherwise
pull the curve down), the best per value, values closer than half a fine step merged. With three values or more, a
least-squares parabola in log objective on the knob's searched [0, 1] scale (the three nearest points alone follow
noise: 3 and 4 draft tokens within 1 % set a slope) must be concave; the move splits a gap between tried values at
least SPLIT fine steps wide (4 and 16 draft tokens: 8) where the parabola beats both the incumbent's value and the
fit's reading of it by FLAT or more. Measured (docs/search.md, search43): on fresh seeds it changed 1 search of 270
(`bracket="lead"`), so `tpe-coord` does not build it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import FrozenTrial, TrialState

from tuner.search.coord import _from_unit
from tuner.search.planned import movable, sla_feasible, snap, to_unit

SETTING = 1  # a profile's trials differ from the incumbent in at most this many categoricals (minor ones aside)
SPLIT = 1.5  # a gap is split when it is this many fine steps wide or more (4 and 16 or 5 and 16 tokens, not 8 and 16)


def bracket_plan(told: Iterable[FrozenTrial], best: FrozenTrial, seen: set[Any],
                 key: Callable[[dict[str, Any]], Any], flat: float,
                 ignore: frozenset[str] = frozenset(),
                 predict: Callable[[dict[str, Any]], float] | None = None,
                 knobs: set[str] | None = None) -> tuple[str, Any, dict[str, Any]] | None:
    """The incumbent `best` with one numeric knob moved into the gap of its profile that the fitted parabola
    rates highest: (knob, value, plan), the knob with the largest predicted gain; None when no gap promises
    `flat` (a share) or more. `seen`: keys (`key(params)`) of the configs told or planned already; `ignore`:
    categorical knobs that need not match (the space's minor ones); `predict`: a model's log objective of a
    config, which moves each profile point to the incumbent's other knobs (a partial residual); None: as told.
    `knobs`: the numeric knobs that may move (None: all)."""
    ok = [t for t in told if t.state == TrialState.COMPLETE and t.values and t.values[0] > 0 and sla_feasible(t)]
    cats = {k for k, d in best.distributions.items() if isinstance(d, CategoricalDistribution) and k not in ignore}
    near = [t for t in ok if set(t.params) == set(best.params)
            and sum(t.params[k] != best.params[k] for k in cats) <= SETTING]
    out: tuple[float, str, Any, dict[str, Any]] | None = None
    for name, d in best.distributions.items():
        if not isinstance(d, (IntDistribution, FloatDistribution)) or not movable(d) \
                or (knobs is not None and name not in knobs):
            continue
        step = _fine(d)
        points = []
        for t in near:
            y = math.log(t.values[0])
            if predict is not None:  # the point as if its other knobs were the incumbent's
                y += predict({**best.params, name: t.params[name]}) - predict(t.params)
            points.append((to_unit(d, t.params[name]), y))
        profile = _profile(points, step / 2)
        u0 = to_unit(d, best.params[name])
        if len(profile) < 3:
            continue  # a parabola needs three values
        fit = _parabola(profile)
        if fit is None:
            continue
        xs = sorted(profile)
        gaps = [(a + b) / 2 for a, b in zip(xs, xs[1:], strict=False) if b - a >= SPLIT * step - 1e-9]
        here = max(fit(u0), math.log(best.values[0]))  # the fit may read the incumbent low: the gain is over both
        for u in gaps:
            gain = fit(u) - here
            v = _from_unit(d, u)
            plan = {**best.params, name: v}
            if gain >= math.log1p(flat) and v != best.params[name] and key(plan) not in seen \
                    and (out is None or gain > out[0]):
                out = (gain, name, v, plan)
    return None if out is None else out[1:]


def _profile(points: list[tuple[float, float]], within: float) -> dict[float, float]:
    """Position -> best log objective, with points closer than `within` merged into their best (15 and 16 draft
    tokens are one value to a parabola: their difference comes from the other knobs)."""
    groups: list[list[tuple[float, float]]] = []
    for u, y in sorted(points):
        if groups and u - groups[-1][0][0] <= within:
            groups[-1].append((u, y))
        else:
            groups.append([(u, y)])
    return dict(max(g, key=lambda p: p[1]) for g in groups)


def _parabola(profile: dict[float, float]) -> Callable[[float], float] | None:
    """The least-squares parabola through the profile's points; None unless it is concave (an interior top)."""
    xs = np.array(sorted(profile))
    a, b, c = np.polyfit(xs, np.array([profile[x] for x in xs]), 2)
    if a >= 0:
        return None
    return lambda x: float(a * x * x + b * x + c)


def _fine(d: IntDistribution | FloatDistribution) -> float:
    """The smallest ordinary move on the knob's [0, 1] scale (x2 on a log range, 1/8 of a linear one): a gap is
    split only into steps this size or larger (a narrower split's middle is about a tried value)."""
    if d.log:
        return math.log(2.0) / math.log(d.high / d.low)
    return 0.125


def fine_step(d: BaseDistribution, old: Any, v: Any) -> bool:
    """A small numeric step: at most x3 on a log range, under 1/5 of a linear range."""
    if not isinstance(d, (IntDistribution, FloatDistribution)) or old is None or math.isclose(d.low, d.high):
        return False
    if d.log:
        return bool(max(v / old, old / v) < 3.0) if old > 0 and v > 0 else False
    return abs(v - old) < 0.2 * (d.high - d.low)


def halfway_value(d: BaseDistribution | None, old: Any, new: Any) -> Any | None:
    """The point between the two ends of a coarse numeric step (not a `fine_step`), snapped; None for a fine step or
    when no value lies strictly between. Why (search44, traced on dynamic seed 551): a draft length 3 -> 12 gained
    3 %, 12 became the incumbent, and its only draft move left, 6, where the top was, read as an interpolation
    between 3 and 12 in every later ranking. Compass search halves the step there."""
    if not isinstance(d, (IntDistribution, FloatDistribution)) or old is None or new is None or old == new \
            or fine_step(d, old, new):
        return None
    if d.log:
        if old <= 0 or new <= 0:
            return None
        mid = math.sqrt(old * new)
    else:
        mid = (old + new) / 2
    x = snap(d, mid)
    return x if min(old, new) < x < max(old, new) else None
