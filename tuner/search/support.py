"""Matched-pair support for a model's claim about a single-knob move (`CoordPolishSampler(untested=...)`, search35).

Why (docs/search.md, issue 19, search34): `tpe-coord`'s misses end one knob from the >= 95 % set, most with the
KV cache at auto where FP8 pays. The additive ridge fit read "KV cache FP8" as a loss because every good trial
had DFlash *and* KV auto and every KV-FP8 trial was a start trial without DFlash: the fit splits credit between
levers that were only ever tried together, so the completing move ranks below noise. Lifting every value no
trial near the incumbent holds (`unsupported`) also lifted FP8 weights off and speculation off, whose negative
claims were just as confounded: it cannot tell a large, consistent effect from a split one.

- **Matched pair**: two SLA-feasible told trials, one with the knob at the new value (a numeric within the
  model's kernel of it) and one not, that differ in little else: their other knobs' differences (1 per
  categorical, a numeric's unit step / 0.25 up to 1), each weighted 0 for a knob known flat (a flat move or a
  tie) and 1 otherwise (`weigh="model"`: by the mean model's spread, 0 under FLAT_SPREAD, 1 at IMPORTANT), sum
  to at most `most`. Knobs present in only one of the two (children of a parent
  the pair differs in) are not counted. A move whose new value has such a pair is *tested*: the data compared
  it with something else in one context, and its predicted gain stands.
- **Untested**: no matched pair. Its predicted gain gets `kappa` x the posterior standard deviation of that
  gain (the mean model's, over the contrast plan - start): optimism exactly where the fit cannot tell the
  lever from what it was tried with (collinear one-hots have a wide posterior along their difference), and
  in proportion to that, so a large, consistent negative claim (FP8 weights off) stays negative while a small
  split one (KV FP8 under DFlash) is tried. Supported claims get nothing.
- **Pair gain** (`pair_gain`): a tested move whose matched pairs hold one trial at the start's value of the knob
  and one at the new value is predicted by those pairs (their mean log-objective difference), not by the fit:
  traced (static, seed 16) a move KV FP8 -> auto had lost 10 % next to the same config, yet the fit, crediting
  the draft length the good trials shared, still read FP8 as a loss from the later incumbent.

Reads only the told trials (through the model) and Optuna's distributions.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import FrozenTrial, TrialState

from tuner.search.coord import FLAT
from tuner.search.planned import knob_gap, sla_feasible, to_unit

IMPORTANT = 0.05  # log-objective spread at which a knob counts fully in a pair's difference
FLAT_SPREAD = 0.01  # below this spread a knob counts nothing (the samplers' FLAT)
NEAR = 0.5  # a numeric trial value is "at" v when the model's kernel similarity to v is at least this


class Support:
    """Matched pairs of the SLA-feasible told trials of one fitted model (`_Additive`), weighted by the mean
    model's per-knob spread next to `here`."""

    def __init__(self, model: Any, here: dict[str, Any], most: float, flat: set[str] | frozenset[str] = frozenset(),
                 weigh: str = "flat") -> None:
        self.model, self.most = model, most
        self.ok = [t.params for t in model.ok]
        self.y = [math.log(t.values[0]) for t in model.ok]
        # "flat": every knob not known flat counts 1 (a narrow peak, a draft length at 4 of 1-16, is invisible to
        # the additive fit's spread); "model": the mean model's spread next to `here`; known flat knobs count 0
        self.weight = {k: 0.0 if k in flat else _importance(model, here, k, d) if weigh == "model" else 1.0
                       for k, d in model.dists.items()}
        n = len(self.ok)
        # per pair: the weighted difference over every knob both hold, and each knob's own share of it
        self.pairs: list[tuple[int, int, float, dict[str, float]]] = []
        for i in range(n):
            for j in range(i + 1, n):
                parts = self._parts(self.ok[i], self.ok[j])
                self.pairs.append((i, j, sum(parts.values()), parts))

    def _parts(self, a: dict[str, Any], b: dict[str, Any]) -> dict[str, float]:
        out: dict[str, float] = {}
        for k in a.keys() & b.keys():
            d = self.model.dists.get(k)
            if d is None or a[k] == b[k]:
                continue
            out[k] = knob_gap(d, a[k], b[k]) * self.weight.get(k, 1.0)
        return out

    def tested(self, name: str, d: BaseDistribution, v: Any) -> bool:
        """Whether two told trials, one at `name` = `v` and one not, differ in at most `most` (weighted) else."""
        for i, j, total, parts in self.pairs:
            a, b = self.ok[i], self.ok[j]
            if name not in a or name not in b:
                continue
            if _at(d, a[name], v) == _at(d, b[name], v):
                continue  # both at v or both away from it: no contrast of this value
            if total - parts.get(name, 0.0) <= self.most + 1e-9:
                return True
        return False

    def contrast(self, name: str, d: BaseDistribution, old: Any, v: Any) -> float | None:
        """Mean log-objective difference (`v` side less `old` side) over the matched pairs with one trial at `v`
        and the other at `old`; None without such a pair."""
        out: list[float] = []
        for i, j, total, parts in self.pairs:
            a, b = self.ok[i], self.ok[j]
            if name not in a or name not in b or total - parts.get(name, 0.0) > self.most + 1e-9:
                continue
            for x, y, sign in ((a, b, 1.0), (b, a, -1.0)):  # x at v, y at old
                if _at(d, x[name], v) and _at(d, y[name], old) and not _at(d, y[name], v):
                    out.append(sign * (self.y[i] - self.y[j]))
        return sum(out) / len(out) if out else None

    def sd(self, here: dict[str, Any], plan: dict[str, Any]) -> float:
        """Posterior standard deviation of the mean model's predicted gain plan - here."""
        cov = self.model.cov
        if not len(cov):
            return 0.0
        c = np.array(self.model.features(plan)) - np.array(self.model.features(here))
        return math.sqrt(max(float(c @ cov @ c), 0.0))


def _at(d: BaseDistribution, x: Any, v: Any) -> bool:
    if isinstance(d, CategoricalDistribution):
        return bool(x == v)
    assert isinstance(d, (IntDistribution, FloatDistribution))
    if math.isclose(d.low, d.high):
        return True
    u = to_unit(d, x) - to_unit(d, v)
    return math.exp(-0.5 * (u / 0.15) ** 2) >= NEAR


def _importance(model: Any, here: dict[str, Any], name: str, d: BaseDistribution) -> float:
    """0 below FLAT_SPREAD, 1 at IMPORTANT and above: the mean model's spread over the knob's values next to
    `here` (every choice of a categorical; 9 points of a numeric range). A knob `here` lacks counts fully."""
    if name not in here or not len(model.mean):
        return 1.0
    if isinstance(d, CategoricalDistribution):
        values = list(d.choices)
    else:
        assert isinstance(d, (IntDistribution, FloatDistribution))
        values = [d.low + (d.high - d.low) * i / 8 for i in range(9)] if not d.log else \
            [math.exp(math.log(d.low) + (math.log(d.high) - math.log(d.low)) * i / 8) for i in range(9)]
    preds = [_mean_predict(model, {**here, name: c}) for c in values]
    spread = max(preds) - min(preds)
    return min(1.0, max(0.0, (spread - FLAT_SPREAD) / (IMPORTANT - FLAT_SPREAD)))


def _mean_predict(model: Any, params: dict[str, Any]) -> float:
    return float((np.array(model.features(params)) - model.mx) @ model.mean)


def pair_flat(told: list[FrozenTrial], most: int) -> dict[str, list[tuple[Any, Any]]]:
    """Categorical knobs that two SLA-feasible told trials within FLAT of each other differ in, when they differ
    in at most `most` knobs (a categorical, or a numeric by >= 1/8 of its range; the same knobs present), each
    with (value, value). Why: the TPE draws next to the incumbent often change only knobs that do nothing
    (stream interval, block size, policy) and tie with it; a tie is the evidence a flat single-knob move buys
    with a trial, so those knobs need not be moved to learn it (a cancelling pair of effects within 1 % is rare)."""
    ok = [
        t for t in told if t.state == TrialState.COMPLETE and t.values and t.values[0] > 0 and sla_feasible(t)
    ]
    out: dict[str, list[tuple[Any, Any]]] = {}
    for i, a in enumerate(ok):
        for b in ok[i + 1 :]:
            if abs(a.values[0] - b.values[0]) >= FLAT * max(a.values[0], b.values[0]) or set(a.params) != set(
                b.params
            ):
                continue
            cats, n = [], 0
            for k, d in a.distributions.items():
                if isinstance(d, CategoricalDistribution):
                    if a.params[k] != b.params[k]:
                        cats.append(k)
                        n += 1
                elif isinstance(d, (IntDistribution, FloatDistribution)) and not math.isclose(d.low, d.high):
                    n += abs(to_unit(d, a.params[k]) - to_unit(d, b.params[k])) >= 0.125 - 1e-9
            if 0 < n <= most:
                for k in cats:
                    out.setdefault(k, []).append((a.params[k], b.params[k]))
    return out
