"""`tpe-coord` variants (`CoordPolishSampler`): failure risk near the whole config, a tighter Thompson draw,
a budget-aware polish phase, finer numeric moves, flatness by interval.

Why (docs/search.md, issue 19): `tpe-coord`'s misses end one knob away from the >= 95 % set (a draft
length at 12 where 8 pays, the KV cache not FP8, speculative decoding off). Traced: a lever seen only in
a trial that failed for another reason (DFlash next to a 0.97 memory share) is blamed by the per-value
failure share and never moved to again; moves went to knobs whose one-hot coefficients were uncertain.

- **Near failures** (`near_fail` > 0): a move's failure risk is the failure share of the told trials weighted
  by exp(-distance to the whole planned config / near_fail) (one success as prior), less the start's. The
  failure is blamed on what the failed trial shared with the plan, not on every value it held.
- **Draw scale** (`draw_scale` < 1): the Thompson draw's covariance times this: fewer moves to knobs
  whose coefficients are merely uncertain (the argmax over many noisy flat-knob values).
- **Polish** (`polish`, with the study's `budget`): the last `polish` launched trials are all moves.
- **Sweep values** (`sweep`): a numeric move may also go to 9 evenly spaced points of the range; **flat by interval**
  (`flat_interval`): a flat numeric move marks only the values between its ends.
- **Flat from ties** (`pair_flat` > 0, search34): two told trials that tie within FLAT and differ in at most
  `pair_flat` knobs mark the categoricals they differ in flat, as a flat move would (traced misses spent a
  quarter of their moves on stream interval, block size, policy and prefix caching, which do nothing there).
- **Unsupported values** (`unsupported`, search34, not kept): a move to a value no feasible trial near holds = start.
- **Untested moves** (`untested` > 0, search35; tuner/search/support.py): a move to a value no matched pair of
  told trials compared (two trials differing in the knob and in at most `untested_most` other knobs not known
  flat) gets `untested` x the posterior SD of its predicted gain: the confounded claim (KV cache FP8 read as a
  loss because it was only tried without DFlash) is tried, a large consistent one (FP8 weights off) is not.
  `pair_gain`: a tested move predicted by its pairs; `complete`: the polish tries untested categoricals first.
- **Rotation** (`rotate` > 0, search41, not kept: fresh seeds no better): a move gets `rotate` of penalty per earlier
  launched move of its knob that did not improve, from a start within `rotate_near` knobs (`rotate_cats`: categoricals).
- **Relief** (`relief` = the space's memory knobs, search41, built by `tpe-coord`): the latest move that ran out of
  memory, of a knob that is not a memory knob and from a start still within FLAT of the incumbent, is launched once
  more with each memory knob a coarse step lower. Why: a move to DFlash from the default 1024 sequences ran out of
  memory (CUDA graphs for 1024 x 16 tokens), and the failure risk then kept every later move from the 2x lever.
- **Bracket** (`bracket`, search43; tuner/search/bracket.py): before the ranked move, a numeric knob of the incumbent
  goes into the gap of its profile (trials a lever apart, moved to the incumbent's other knobs by the model) that a
  least-squares parabola rates highest, when that beats the incumbent by FLAT; "lead": only the knob of the move that
  made the incumbent (a draft length 4 -> 16 that gained 2 % is followed by 8, where the top is). "half" (search44): no
  parabola; after a coarse numeric move (x3 or more, a fifth of a linear range) made the incumbent by FLAT or more,
  its midpoint once (compass search's step halving).
- **Levers after a stall** (`stall` = n, `levers` = Space.levers(), search46): once n trials have launched since the
  incumbent without beating it, its untried moves of the output-changing knobs and their children (KV cache, weights,
  speculative method, draft length) go first. Why: 20 of 38 traced misses ended one draft-length move from >= 95 %.
  `stall_end` = e (search47): the same in the last e trials of `budget`, where a late incumbent never stalls n times;
  `end_moves`: each of those trials is a move (else `move_share` of them).
- **Coarse steps first** (`fine` > 0, search40, not kept: fresh seeds equal): a fine numeric step gets `fine` more.

Chosen on the benchmark's seeds 0-29 (docs/search.md, "Near failures and a tighter draw"): near_fail 3,
draw_scale 0.25, no polish, no sweep values, flat by knob (`tpe-coord-nf`); the polish, sweep and interval
options lost hits there and are kept only as the benchmark's `tpe-coord-p*` variants. It reads only the
told trials, Optuna's distributions and (for the polish) the study's trial budget.

What `search.algorithm: tpe-coord` builds (search39, docs/search.md "`tpe-coord` with minor knobs and halves"):
`chosen(untested=UNTESTED, minor=space.minor(), halves=True)`: the space's minor knobs moved last (`minor`, in the base
class), a linear numeric also moved to half and twice its value (`halves`: a linear count 4 -> 2 -> 1; the draft
length, linear until search42, is log-scaled in the space files now and moves x/ 2 and 4 anyway); since search41 also
`relief=space.memory()`; since search44 also `bracket="half"`; since search46 also `stall=STALL` with the space's levers;
since search47 also `stall_end=STALL_END` with the study's trial budget.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.study import Study, StudyDirection
from optuna.trial import FrozenTrial, TrialState

from tuner.search.attrs import A_DUPLICATE, A_OUTCOME, A_REJECTED
from tuner.search.bracket import bracket_plan, fine_step, halfway_value
from tuner.search.coord import (
    FLAT,
    FLAT_PENALTY,
    CoordTPESampler,
    _Additive,
    _candidates,
    _from_unit,
    _key,
    _neighbours,
    _told,
)
from tuner.search.planned import incumbent, knob_gap, sla_feasible, snap, to_unit
from tuner.search.support import Support, pair_flat
from tuner.trial.outcome import TrialOutcome

COVER = (
    10.0  # polish with `cover`: penalty per earlier move of the knob from the same start (beyond any gain)
)
COMPLETE = 2.0  # `complete`: penalty of a tested or numeric move in the polish (after the untested categoricals)
STALL = 8  # `tpe-coord`: trials launched without beating the incumbent before its levers go first (search46)
STALL_END = 6  # `tpe-coord`: and in the last this many trials of the budget, however recent the incumbent (search47)
LEVER_FIRST = 2.0  # `stall`: a lever move's bonus, beyond any flat or minor-knob penalty (FLAT_PENALTY = 1)
SWEEP_POINTS = 9  # evenly spaced values of a numeric range a move may take (with the ordinary steps)


NEAR_FAIL = 3.0  # width (knobs of difference) of the failure-risk kernel: chosen on seeds 0-29
PAIR_FLAT = (
    4  # `tpe-coord-pf`: ties of told trials differing in <= this many knobs mark categoricals flat (search34)
)
DRAW_SCALE = 0.25  # Thompson covariance factor: chosen on seeds 0-29
UNTESTED = 1.0  # `tpe-coord-ut`: posterior SDs added to a move no matched pair tested (chosen on seeds 0-29, search35)


class CoordPolishSampler(CoordTPESampler):
    """CoordTPESampler with the options above; `CoordPolishSampler.chosen(...)` is the variant chosen on the
    benchmark's seeds 0-29 (`tpe-coord-nf`). `sweep`: "always", "polish" (only then), "points" (polish: sweep
    points only) or "none"; `cover`: in the polish a knob moved from this start goes after the others."""

    @classmethod
    def chosen(
        cls,
        *,
        seed: int | None = None,
        n_startup_trials: int = 6,
        pair_flat: int = 0,
        untested: float = 0.0,
        untested_cats: bool = False,
        **kw: Any,
    ) -> CoordPolishSampler:
        """Near failures (width NEAR_FAIL) and the tighter draw (DRAW_SCALE); no polish, sweep or interval.
        `pair_flat=PAIR_FLAT` is the benchmark's `tpe-coord-pf` (ties of told trials mark flat knobs); `kw` the
        other options (`minor`, `halves`: the benchmark's `tpe-coord-mh`)."""
        return cls(
            **kw,
            pair_flat=pair_flat,
            untested=untested,
            untested_cats=untested_cats,
            seed=seed,
            n_startup_trials=n_startup_trials,
            polish=0,
            sweep="none",
            flat_interval=False,
            near_fail=NEAR_FAIL,
            draw_scale=DRAW_SCALE,
        )

    def __init__(
        self,
        *,
        budget: int | None = None,
        polish: int = 8,
        sweep: str = "always",
        flat_interval: bool = True,
        near_fail: float = 0.0,
        cover: bool | str = False,
        outside: float = 0.5,
        importance: float = 0.0,
        draw_scale: float = 1.0,
        pair_flat: int = 0,
        unsupported: float = 0.0,
        untested: float = 0.0,
        untested_most: float = 1.0,
        untested_cats: bool = False,
        weigh: str = "flat",
        complete: bool = False,
        pair_gain: bool = False,
        halves: bool = False,
        wide: bool = False,
        fine: float = 0.0,
        rotate: float = 0.0,
        rotate_near: float = 2.0,
        rotate_cats: bool = False,
        relief: frozenset[str] = frozenset(),
        bracket: bool | str = False,
        levers: frozenset[str] = frozenset(),
        stall: int = 0,
        stall_end: int = 0,
        end_moves: bool = False,
        **kw: Any,
    ) -> None:
        super().__init__(**kw)
        self.budget, self.polish, self.sweep, self.flat_interval = budget, polish, sweep, flat_interval
        self.near_fail = near_fail  # > 0: failure risk from the told trials near the whole config (this width)
        self.outside = outside  # share of FLAT_PENALTY for a numeric value outside every flat interval
        self.importance = importance  # in the polish: gain bonus per unit of the knob's predicted spread
        self._draw_scale = draw_scale
        self.cover = cover  # in the polish: a knob already moved from this start goes after every other knob
        # ("unflat": only its moves that changed the objective count)
        self._polishing = False
        self.pair_flat = pair_flat  # > 0: two told trials that tie and differ in <= this many knobs mark
        # their differing categoricals flat (free evidence from the TPE draws; support.pair_flat)
        self.unsupported = unsupported  # > 0: a categorical move to a value no SLA-feasible told trial holds
        # within this distance of the start is predicted no worse than the start (`_predicted`)
        self.untested = untested  # > 0: a move to a value no matched pair of told trials tested gets this many
        # posterior SDs of its predicted gain (tuner/search/support.py); pairs differ in <= `untested_most` else
        self.untested_most, self.untested_cats = untested_most, untested_cats  # cats: categorical moves only
        self._support: tuple[_Additive, Support] | None = None  # the support of the model ranking this move
        self.weigh = weigh  # how a pair's other differences count: "flat" (1 unless known flat) or "model"
        self._flat_now: dict[str, list[tuple[Any, Any]]] = {}  # the flat knobs of the move being planned
        self.pair_gain = pair_gain  # with `untested`: a tested move predicted by its matched pairs' difference
        self.halves = halves  # a linear numeric knob also moves to half and twice its value
        self.wide = wide  # a linear numeric knob also moves by +- 1/2 of its range
        self.fine = fine  # penalty of a fine numeric step (x2 on a log range, < 1/5 of a linear one): coarse first
        self.rotate, self.rotate_near, self.rotate_cats = rotate, rotate_near, rotate_cats
        self.relief = relief  # Optuna names of the memory knobs: a move that ran out of memory is tried once more
        # with each of them a coarse step lower (a lever such as DFlash is not judged by one config's memory)
        self.bracket = bracket  # a move may split a numeric knob's gap (tuner/search/bracket.py); "lead": only the
        # knob of the move that made the incumbent
        self._relieved: set[int] = set()  # out-of-memory move trials already retried with relief
        self._launched_moves: list[tuple[str, dict[str, Any]]] = []  # (knob, its start's params) per launched move
        # `stall`, `stall_end`, `end_moves`: the levers after a stall and in the last trials (module docstring)
        self.levers, self.stall, self._stalled = levers, stall, False
        self.stall_end, self.end_moves = stall_end, end_moves
        self.complete = complete  # in the polish (the last `polish` trials of `budget`): the start's untested
        # categorical moves (no matched pair) before every other move (`_flat_penalty`)

    def _best_move(self, study: Study, trial: FrozenTrial) -> dict[str, Any] | None:
        if self.stall or self.stall_end:  # trials launched after the incumbent (the one planned, RUNNING, not counted)
            trials, _, best = self._told_best(study)
            self._stalled = best is not None and (self._in_last(study, self.stall_end) or 0 < self.stall <= sum(
                t.number > best.number and _launched(t) and t.state != TrialState.RUNNING for t in trials))
        if self.relief:
            plan = self._relief_plan(study, trial)
            if plan is not None:
                return plan
        if self.bracket and study.direction == StudyDirection.MAXIMIZE:
            plan = self._bracket_plan(study, trial)
            if plan is not None:
                return plan
        return super()._best_move(study, trial)

    def _bracket_plan(self, study: Study, trial: FrozenTrial) -> dict[str, Any] | None:
        """The incumbent with one numeric knob in the gap its profile's parabola rates highest (tuner/search/bracket.py),
        or (`bracket="half"`) at the midpoint of the coarse move that made it."""
        trials, told, best = self._told_best(study)
        if best is None:
            return None
        if self.bracket in ("half", "half-loss"):
            found = self._halfway(best, self._seen(trials, trial), trials)
        else:
            knobs = None
            if self.bracket == "lead":  # only a numeric knob whose move made the incumbent: no model fit otherwise
                moved = self.moves.get(best.number)
                if moved is None or not isinstance(best.distributions.get(moved[0]), (IntDistribution, FloatDistribution)):
                    return None
                knobs = {moved[0]}
            model = _Additive(told, centre=best.params if self.local > 0 else None, width=self.local)
            found = bracket_plan(told, best, self._seen(trials, trial), _key, FLAT, self.minor, model.predict, knobs)
        if found is None:
            return None
        name, v, plan = found
        self.moves[trial.number] = (name, v)
        self._from[trial.number] = best.values[0]
        self._moved_from[trial.number] = best.params.get(name)
        self._start_of[trial.number] = best.number
        return plan

    def _halfway(self, best: FrozenTrial, seen: set[Any],
                 trials: list[FrozenTrial]) -> tuple[str, Any, dict[str, Any]] | None:
        """`bracket="half"`: the midpoint of the coarse numeric move that made the incumbent (gaining FLAT), once;
        `"half-loss"`: also the midpoint of a coarse numeric move from the incumbent that lost FLAT (compass search
        contracts a failed step: the knob matters, and its top may lie between the two)."""
        for name, old, new in self._coarse_ends(best, trials):
            v = halfway_value(best.distributions.get(name), old, new)
            plan = {**best.params, name: v}
            if v is not None and _key(plan) not in seen:
                return name, v, plan
        return None

    def _coarse_ends(self, best: FrozenTrial, trials: list[FrozenTrial]) -> Iterator[tuple[str, Any, Any]]:
        """(knob, one end, other end) of the steps `_halfway` may split: the move that made the incumbent when it
        gained FLAT, then (`"half-loss"`) each move from the incumbent that lost FLAT, latest first."""
        moved, base = self.moves.get(best.number), self._from.get(best.number)
        if moved is not None and base is not None and best.values[0] >= base * (1 + FLAT):
            yield moved[0], self._moved_from.get(best.number), moved[1]
        if self.bracket != "half-loss":
            return
        for t in sorted(trials, key=lambda t: -t.number):
            if self._start_of.get(t.number) == best.number and t.state == TrialState.COMPLETE and t.values \
                    and t.values[0] <= best.values[0] * (1 - FLAT):
                name = self.moves[t.number][0]
                yield name, best.params.get(name), t.params.get(name)

    def _relief_plan(self, study: Study, trial: FrozenTrial) -> dict[str, Any] | None:
        """The latest out-of-memory move of a knob that is not a memory knob, from a trial still within FLAT of the
        incumbent, retried with every memory knob of that start a coarse step lower (x1/4 on a log range, -1/4 of a
        linear one); None when there is none to retry."""
        trials = study.get_trials(deepcopy=False)
        by_number = {t.number: t for t in trials}
        best = incumbent(study, [t for t in trials if _told(t) and t.state == TrialState.COMPLETE])
        if best is None:
            return None
        seen = {_key(t.params) for t in trials if t.number != trial.number}
        for n in sorted(self.moves, reverse=True):
            t, (name, v) = by_number.get(n), self.moves[n]
            start = by_number.get(self._start_of.get(n, -1))
            if (t is None or start is None or n in self._relieved or name in self.relief or not start.values
                    or t.user_attrs.get(A_OUTCOME) != TrialOutcome.OOM.value):
                continue
            if start.values[0] < best.values[0] * (1 - FLAT):  # moves from a point that is no longer (near) the best
                continue
            self._relieved.add(n)
            plan = dict(t.params)  # the failed move as launched (children of the moved knob included)
            for m in self.relief & set(plan):
                d = best.distributions.get(m)
                if isinstance(d, (IntDistribution, FloatDistribution)):
                    raw = plan[m] / 4 if d.log else plan[m] - (d.high - d.low) / 4
                    plan[m] = snap(d, max(d.low, raw))
            if plan == t.params or _key(plan) in seen:
                continue
            self.moves[trial.number] = (name, v)
            self._from[trial.number] = start.values[0]
            self._moved_from[trial.number] = start.params.get(name)
            self._start_of[trial.number] = start.number
            return plan
        return None

    def _in_last(self, study: Study, k: int) -> bool:
        """Whether the trial being planned (RUNNING: counted among the launched) is one of the last k of `budget`."""
        if not self.budget or k <= 0:
            return False
        return sum(1 for t in study.get_trials(deepcopy=False) if _launched(t)) > self.budget - k

    def _move_due(self, study: Study) -> bool:
        if self.end_moves and self._in_last(study, self.stall_end):
            return True
        self._polishing = self._in_last(study, self.polish)
        return self._polishing

    def _move_values(self, d: BaseDistribution, v: Any) -> list[Any]:
        out = (
            []
            if self.sweep == "points" and self._polishing and not isinstance(d, CategoricalDistribution)
            else _neighbours(d, v)
        )
        if (self.halves or self.wide) and isinstance(d, (IntDistribution, FloatDistribution)) and not d.log:
            raws = ([v / 2, v * 2] if self.halves and d.low >= 0 else []) + \
                ([v + 0.5 * (d.high - d.low), v - 0.5 * (d.high - d.low)] if self.wide else [])
            for raw in raws:
                x = snap(d, raw) if d.low <= raw <= d.high else None
                if x is not None and x != v and x not in out:
                    out.append(x)
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

    def _predicted(
        self,
        model: _Additive,
        here: dict[str, Any],
        plan: dict[str, Any],
        name: str,
        d: BaseDistribution,
        v: Any,
    ) -> float:
        """With `unsupported`: no worse than `here` for a categorical value never seen near `here`. Why: the
        additive fit splits credit between levers that were always tried together (every good trial had DFlash
        and KV cache auto), so the untried "KV cache FP8 under DFlash" read as a loss and was never moved to."""
        pred = model.predict(plan)
        if self.untested > 0 and name in here and name not in self.minor \
                and not (self.untested_cats and not isinstance(d, CategoricalDistribution)):
            if self._support is None or self._support[0] is not model:
                self._support = (model, Support(model, here, self.untested_most, set(self._flat_now), self.weigh))
            support = self._support[1]
            if not support.tested(name, d, v):
                pred += self.untested * support.sd(here, plan)
            elif self.pair_gain:
                c = support.contrast(name, d, here[name], v)
                if c is not None:
                    pred = model.predict(here) + c
        if self.unsupported <= 0 or not isinstance(d, CategoricalDistribution):
            return pred
        rest = {k: x for k, x in here.items() if k != name}
        for t in model.ok:
            if t.params.get(name) == v:
                other = {k: x for k, x in t.params.items() if k != name}
                if _distance(model.dists, rest, other) <= self.unsupported:
                    return pred
        return max(pred, model.predict(here))

    def _flat(self, trials: list[FrozenTrial]) -> dict[str, list[tuple[Any, Any]]]:
        if self.rotate:
            by_number = {t.number: t for t in trials}
            self._launched_moves = [
                (name, by_number[self._start_of[n]].params)
                for n, (name, _) in self.moves.items()
                if n in by_number and self._start_of.get(n) in by_number and _launched(by_number[n])
                and not self._improved(by_number[n])
            ]
        out = super()._flat(trials)
        if self.pair_flat > 0:
            for name, moves in pair_flat([t for t in trials if _told(t)], self.pair_flat).items():
                out.setdefault(name, []).extend(moves)
        self._flat_now = out
        return out

    def _improved(self, t: FrozenTrial) -> bool:
        """A told move that beat the objective it moved from by FLAT (SLA-feasible): a direction worth going on in."""
        base = self._from.get(t.number)
        return (base is not None and base > 0 and t.state == TrialState.COMPLETE and bool(t.values)
                and sla_feasible(t) and t.values[0] >= base * (1 + FLAT))

    def _flat_penalty(
        self, flat: dict[str, list[tuple[Any, Any]]], name: str, d: BaseDistribution, old: Any, v: Any
    ) -> float:
        base = 0.0
        if self.cover and self._polishing:
            flat_moves = set(flat.get(name, [])) if self.cover == "unflat" else set()
            base = COVER * sum(
                1
                for n, (k, new) in self.moves.items()
                if k == name
                and self._start_of.get(n) == self._start
                and (self._moved_from.get(n), new) not in flat_moves
            )
        if self.importance and self._polishing and self._model_now is not None:
            base -= self.importance * _spread(self._model_now, self._start_params, name, d)
        if self.complete and self._polishing and self._model_now is not None:
            model = self._model_now
            if self._support is None or self._support[0] is not model:
                self._support = (model, Support(model, self._start_params, self.untested_most, set(self._flat_now),
                                                self.weigh))
            if not isinstance(d, CategoricalDistribution) or self._support[1].tested(name, d, v):
                base += COMPLETE
        if self.fine and fine_step(d, old, v):
            base += self.fine
        if self._stalled and name in self.levers:
            base -= LEVER_FIRST
        rotates = self.rotate and not (self.rotate_cats and not isinstance(d, CategoricalDistribution))
        if rotates and self._model_now is not None:
            dists = self._model_now.dists
            base += self.rotate * sum(1 for k, start in self._launched_moves
                                      if k == name and _distance(dists, start, self._start_params) <= self.rotate_near)
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
        return FLAT_PENALTY * self.outside


def _launched(t: FrozenTrial) -> bool:
    """A trial that ran or is running (not skipped before launch as predicted to fail or as a duplicate)."""
    return t.state != TrialState.FAIL or (A_REJECTED not in t.user_attrs and A_DUPLICATE not in t.user_attrs)


def _distance(dists: dict[str, BaseDistribution], a: dict[str, Any], b: dict[str, Any]) -> float:
    """Knobs two configs differ in: 1 per presence difference, else planned.knob_gap."""
    return sum(1.0 if k not in a or k not in b else knob_gap(dists.get(k), a[k], b[k]) for k in set(a) | set(b))


def _near_failed(model: _Additive, params: dict[str, Any], width: float) -> float:
    """Share of failed told trials, weighted by closeness to `params`, with one success as prior."""
    num, den = 0.0, 1.0
    for t in model.told:
        if _told(t):
            w = math.exp(-_distance(model.dists, params, t.params) / width)
            num, den = num + w * (t.state == TrialState.FAIL), den + w
    return num / den


def _spread(model: _Additive, here: dict[str, Any], name: str, d: BaseDistribution) -> float:
    """How much the model's prediction moves over the knob's values next to `here` (max - min, log objective):
    a knob that matters gets its moves first in the polish."""
    if name not in here:
        return 0.0
    preds = [model.predict({**here, name: c}) for c in _candidates(model, name, d)]
    return max(preds) - min(preds) if preds else 0.0
