"""Single-knob moves of the incumbent ranked by a model, on multivariate TPE: the base of `search.algorithm:
tpe-coord` (the default), which builds `CoordPolishSampler.chosen(...)` of tuner/search/coord_polish.py on it.

Why (benchmarks/search_efficiency.py, the lever space with speculative decoding): the configs within 95 %
of the optimum are 5-30 of 2000-3600 and need several levers at once (DFlash at the right draft length,
FP8 weights and KV cache, a sequence cap, a memory share that does not run out of memory), while the
scheduler knobs barely matter there. The searches that miss end one knob away (KV cache not FP8, 8 draft
tokens where 4 pay); TPE re-draws the basin and random neighbour moves (tpe-local) pick the one knob that
completes it 1 time in ~25.

- **Start**: `n_startup_trials` random trials (TPE's own startup), after the baseline.
- **Moves**: then `move_share` of the guided trials copy the best SLA-feasible trial (the "centre"; it
  moves only when beaten by more than FLAT, so noise does not restart the sweep) and change exactly one
  knob: another choice of a categorical, or a step of a numeric knob (x or / 4 and 2 on a log range,
  +- 1/4 and 1/8 of a linear one). The move is the untried one with the largest predicted gain under a
  ridge regression of log(objective) on the knobs (one-hot choices, x and x^2 of numerics) over the
  SLA-feasible trials, each weighted by exp(-knobs it differs from the centre / `local`), with the
  coefficients drawn from their Gaussian posterior (Thompson: an uncertain lever gets its turn), less
  FAIL_WEIGHT x the share of launched trials near the new value that failed (OOM), and knobs whose move
  changed the objective by < FLAT tried last.
- **Conditional knobs** (`conditional=True`; off by default: on fresh seeds 30-59 it gained 5 static hits
  and lost 2 mixed ones against the sampler without it, short of the rule fixed before, docs/search.md): a parent (a knob whose value switches others on or off, e.g. the
  speculative method over the draft length) is judged with its children: when a parent move changed nothing
  or took the lead, the next coordinate move sweeps that trial's children (`child_moves`; any value of the
  child, ranked by the model and the residuals near the value), and the parent counts as "changed nothing"
  only when the move and its sweep both did. Why: a bad draft length drawn with DFlash made the method look
  flat, so it was tried last (docs/search.md). The children of the move itself come from TPE (`children`;
  "model" and "sibling", the best told trial's, were worse on seeds 0-29). Parents and children are read
  off the told trials, so no space is needed.
- **TPE**: the other guided trials are multivariate grouped TPE's (a draft length matters only under a method).

Settings chosen on the benchmark's seeds 0-9 against variants (a Latin-hypercube start: `designed`;
unweighted or mean-only models; a move share of 1/3 or 2/3; docs/search.md). Uses only the trials it is
told and the distributions Optuna passes (no benchmark levels, no simulator).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.samplers import TPESampler
from optuna.study import Study
from optuna.trial import FrozenTrial, TrialState

from tuner.search.attrs import A_DUPLICATE, A_REJECTED
from tuner.search.planned import PlannedSampler, incumbent, movable, sla_feasible, snap, to_unit

COORD_STARTUP = 6  # random start trials (a cap on the study's n_startup_trials): chosen with the rest on seeds 0-9
KERNEL = 0.15  # width of the main-effects kernel for numeric knobs, on their [0, 1] (log) scale
FAIL_WEIGHT = 1.0  # a failure counts as this loss of log(objective) in a move's predicted gain
FLAT = 0.01  # a move that changed the objective by less than this share marks its knob flat
FLAT_PENALTY = 1.0  # predicted-gain penalty of moving a flat knob (in log objective: tried after the others)
BONUS = 0.05  # exploration bonus for a knob value few trials have tried (divided by sqrt(weight + 1))


class CoordTPESampler(PlannedSampler):
    """Random start, then single-knob moves of the incumbent ranked by a locally weighted Bayesian ridge
    model (Thompson draw), interleaved with multivariate TPE draws. `designed=True` makes the start a Latin
    hypercube (every categorical choice equally often; tried, worse on the benchmark)."""

    def __init__(self, *, seed: int | None = None, n_startup_trials: int = COORD_STARTUP, move_share: float = 0.5,
                 ranked: bool = True, designed: bool = False, thompson: bool = True, local: float = 4.0,
                 constant_liar: bool = True, conditional: bool = False, child_moves: int = 1,
                 children: str = "tpe", minor: frozenset[str] = frozenset()) -> None:
        self._tpe = TPESampler(seed=seed, n_startup_trials=n_startup_trials, constant_liar=constant_liar,
                               multivariate=True, group=True)
        super().__init__(self._tpe, seed)
        self.n_startup_trials, self.move_share, self.ranked = n_startup_trials, move_share, ranked
        self.local = local  # > 0: trials weighted by exp(-(knobs differing from the incumbent) / local)
        self.thompson = thompson  # rank by a draw of the coefficients from the ridge posterior, not their mean
        self.designed = designed  # True: a Latin-hypercube start instead of TPE's random one
        self._design: dict[int, int] = {}  # trial number -> row of the designed start
        self._rows = 0  # design rows handed out
        self._columns: dict[str, list[int]] = {}  # knob -> its shuffled strata / choice indices, one per row
        self._guided = 0  # trials handed out after the start (moves and TPE draws)
        self._centre = -1  # the trial whose single-knob moves are being swept
        self._from: dict[int, float] = {}  # trial number of a move -> the incumbent's objective it moved from
        self.moves: dict[int, tuple[str, Any]] = {}  # trial number -> (knob, new value), for tests and traces
        self._moved_from: dict[int, Any] = {}  # trial number of a move -> the knob's value it moved from
        self._start_of: dict[int, int] = {}  # trial number of a move -> the trial it moved from
        self._start = -1  # the trial the move being planned starts from
        self._start_params: dict[str, Any] = {}  # and its config
        self._model_now: _Additive | None = None  # the model ranking the move being planned
        self._draw_scale = 1.0  # the Thompson draw's covariance, times this (coord_polish.py varies it)
        self.conditional = conditional  # parents judged with their children (False: as chosen on seeds 0-9)
        self.child_moves = child_moves  # follow-up moves of a parent move's children before judging the parent
        self.children = children  # a parent move's children: "model", "sibling" (the best told trial's at that
        # parent value; TPE if none) or "tpe" (drawn by TPE)
        self._model: dict[int, _Additive] = {}  # move trial -> the model that planned it (children asked late)
        self._sweeps: dict[int, list[int]] = {}  # parent move trial -> its child-sweep move trials
        self._sweep_of: dict[int, int] = {}  # child-sweep move trial -> the parent move trial it sweeps
        self._origin: dict[int, int] = {}  # parent move trial -> the trial it moved from
        self.minor = minor  # Optuna names of the knobs the space marks minor (`Space.minor`): moved last

    # ------------------------------------------------------------------ planning

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        self._tpe.before_trial(study, trial)
        if "fixed_params" in trial.system_attrs:  # enqueued (a baseline, a warm start): nothing to plan
            return
        if self._rows < self.n_startup_trials:
            if self.designed:
                self._design[trial.number] = self._rows
            self._rows += 1
            return
        self._guided += 1
        g, p = self._guided, self.move_share
        if len(study.directions) > 1 or not (self._move_due(study) or
                                             math.floor(g * p + 1e-9) != math.floor((g - 1) * p + 1e-9)):
            return  # a TPE draw (multi-objective studies: TPE only)
        plan = self._best_move(study, trial)
        if plan is not None:
            self._plans[trial.number] = plan

    def sample_independent(self, study: Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        row = self._design.get(trial.number)
        if row is not None:
            return self._designed(param_name, param_distribution, row)
        plan, model = self._plans.get(trial.number), self._model.get(trial.number)
        if plan is not None and model is not None and param_name not in plan and param_name in model.dists \
                and self.children == "model":
            # a knob the move switched on that the plan could not foresee: the model's best value for it
            plan[param_name] = _best_value(model, {**plan, **trial.params}, param_name, param_distribution)
            return plan[param_name]
        return super().sample_independent(study, trial, param_name, param_distribution)

    def infer_relative_search_space(self, study: Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        if trial.number in self._design:
            return {}
        return super().infer_relative_search_space(study, trial)

    def after_trial(self, study: Study, trial: FrozenTrial, state: TrialState, values: Any) -> None:
        self._design.pop(trial.number, None)
        self._model.pop(trial.number, None)
        super().after_trial(study, trial, state, values)

    # ------------------------------------------------------------------ designed start

    def _designed(self, name: str, d: BaseDistribution, row: int) -> Any:
        """Row `row` of a Latin hypercube of `n_startup_trials` rows: categoricals balanced, numerics stratified."""
        n = self.n_startup_trials
        col = self._columns.get(name)
        if col is None:
            k = len(d.choices) if isinstance(d, CategoricalDistribution) else n
            col = [i % k for i in range(n)]
            self._rng.shuffle(col)
            self._columns[name] = col
        i = col[row % n]
        if isinstance(d, CategoricalDistribution):
            return d.choices[i % len(d.choices)]
        assert isinstance(d, (IntDistribution, FloatDistribution))
        u = (i + self._rng.uniform()) / n
        return _from_unit(d, u)

    # ------------------------------------------------------------------ coordinate moves

    def _told_best(self, study: Study) -> tuple[list[FrozenTrial], list[FrozenTrial], FrozenTrial | None]:
        """Every trial, the told ones, and the incumbent among them (None before a SLA-feasible one)."""
        trials = study.get_trials(deepcopy=False)
        told = [t for t in trials if _told(t)]
        return trials, told, incumbent(study, [t for t in told if t.state == TrialState.COMPLETE])

    def _seen(self, trials: list[FrozenTrial], trial: FrozenTrial) -> set[tuple[tuple[str, str], ...]]:
        """Keys of the configs other trials hold or were planned with: a move must be new."""
        seen = {_key(t.params) for t in trials if t.number != trial.number}
        return seen | {_key(p) for n, p in self._plans.items() if n != trial.number}

    def _best_move(self, study: Study, trial: FrozenTrial) -> dict[str, Any] | None:
        trials, told, best = self._told_best(study)
        if best is None:
            return None
        centre = next((t for t in told if t.number == self._centre), None)
        if centre is not None and best.values[0] < centre.values[0] * (1 + FLAT):
            best = centre  # not better by FLAT: keep sweeping the same point's moves rather than restart on noise
        self._centre = best.number
        seen = self._seen(trials, trial)
        kids = _children(told) if self.conditional else {}
        sweep, sweeping = self._sweep_due(told, best, kids)
        start = sweep if sweep is not None else best
        model = _Additive(told, rng=self._rng if self.thompson else None,
                          centre=start.params if self.local > 0 else None, width=self.local, scale=self._draw_scale)
        here = model.predict(start.params)
        self._start, self._start_params, self._model_now = start.number, start.params, model
        flat = self._flat(trials)
        ranked: list[tuple[float, float, str, Any, dict[str, Any]]] = []
        for name, d in start.distributions.items():
            if not movable(d) or (sweep is not None and name not in sweeping):
                continue
            values = self._move_values(d, start.params[name]) if sweep is None else \
                [c for c in _candidates(model, name, d) if c != start.params[name]]  # a guessed child: any value
            for v in values:
                plan, extra = {**start.params, name: v}, 0.0
                sib = _sibling(study, told, name, v) if self.children == "sibling" and sweep is None else None
                if sib is not None:
                    plan.update({k: sib.params[k] for k in kids.get(name, ()) if k in sib.params})
                for kid in sorted(kids.get(name, ())) if sweep is None and self.children == "model" else ():
                    kd = model.dists.get(kid)
                    asked = _active(told, kid, name, v)  # seen under this value: the trial will ask it
                    if kd is not None and (asked or kid in start.params):  # (or carried over: ngram -> dflash)
                        plan[kid] = _best_value(model, plan, kid, kd)
                        extra += model.local(kid, kd, plan[kid]) if asked else 0.0  # worth its best completion
                if _key(plan) in seen:
                    continue
                old = start.params[name]
                gain = (self._predicted(model, start.params, plan, name, d, v) - here + extra
                        + BONUS * (model.rarity(name, d, v) - model.rarity(name, d, old))
                        - FAIL_WEIGHT * self._fail_risk(model, start.params, plan, name, d, old, v))
                if sweep is not None:  # a child sweep: the residuals near the value count, as when it was set
                    gain += model.local(name, d, v) - model.local(name, d, old)
                gain -= self._flat_penalty(flat, name, d, old, v)
                gain -= FLAT_PENALTY * (name in self.minor)  # the space marks it minor: after every other knob
                ranked.append((gain if self.ranked else 0.0, float(self._rng.uniform()), name, v, plan))
        if not ranked and sweep is not None:  # every child move tried: judge the parent on what was told
            self._sweeps[sweep.number] = [-1] * self.child_moves
            return self._best_move(study, trial)
        if not ranked:
            return None
        _, _, name, v, plan = max(ranked, key=lambda r: r[:2])
        self.moves[trial.number] = (name, v)
        self._from[trial.number] = start.values[0] if start.values else best.values[0]
        self._moved_from[trial.number] = start.params[name]
        self._start_of[trial.number] = start.number
        if sweep is not None:
            self._sweeps.setdefault(sweep.number, []).append(trial.number)
            self._sweep_of[trial.number] = sweep.number
        elif kids.get(name):
            self._sweeps[trial.number] = []  # a parent move: its children get `child_moves` sweeps
            self._origin[trial.number] = start.number
        if self.conditional:
            self._model[trial.number] = model
        return plan

    def _sweep_due(self, told: list[FrozenTrial], best: FrozenTrial,
                   kids: dict[str, set[str]]) -> tuple[FrozenTrial | None, set[str]]:
        """The earliest told parent move whose children have had fewer than `child_moves` sweeps, that
        switched children on or changed them (against the trial it moved from) and that changed nothing or
        took the lead (SLA-feasible, >= the objective it moved from less FLAT): its children are moved next."""
        by_number = {t.number: t for t in told}
        for n, done in sorted(self._sweeps.items()):
            t, origin = by_number.get(n), by_number.get(self._origin.get(n, -1), best)
            if t is None or len(done) >= self.child_moves:
                continue
            switched = _switched_on(t, origin, kids)
            base = self._from.get(n, 0.0)
            told_ok = t.state == TrialState.COMPLETE and bool(t.values) and sla_feasible(t) and base > 0
            # only a move that changed nothing (the children may have hidden the lever) or took the lead (its
            # children were a guess) is worth a sweep; a clearly worse branch is not flat and not swept
            if switched and told_ok and t.values[0] >= base * (1 - FLAT):
                return t, switched
            self._sweeps[n] = [-1] * self.child_moves  # nothing to sweep: the parent is judged on this trial alone
        return None, set()

    # ------------------------------------------------------------------ hooks (tuner/search/coord_polish.py)

    def _move_due(self, study: Study) -> bool:
        """Whether the next guided trial must be a move whatever `move_share` says (never, here)."""
        return False

    def _predicted(self, model: _Additive, here: dict[str, Any], plan: dict[str, Any], name: str,
                   d: BaseDistribution, v: Any) -> float:
        """The model's log objective at the planned config (the move from `here` sets `name` to `v`)."""
        return model.predict(plan)

    def _move_values(self, d: BaseDistribution, v: Any) -> list[Any]:
        """The values a single-knob move of a knob at `v` may take."""
        return _neighbours(d, v)

    def _fail_risk(self, model: _Additive, here: dict[str, Any], plan: dict[str, Any], name: str,
                   d: BaseDistribution, old: Any, v: Any) -> float:
        """How much likelier the move is to fail than its start: the share of failures near the new value of
        the knob less that near the old one (over all told trials)."""
        return model.failed(name, d, v) - model.failed(name, d, old)

    def _flat_penalty(self, flat: dict[str, list[tuple[Any, Any]]], name: str, d: BaseDistribution, old: Any,
                      v: Any) -> float:
        """Predicted-gain penalty of moving `name` from `old` to `v`: FLAT_PENALTY once any move of it was flat."""
        return FLAT_PENALTY if name in flat else 0.0

    def _flat(self, trials: list[FrozenTrial]) -> dict[str, list[tuple[Any, Any]]]:
        """Knobs whose move changed the objective by less than FLAT (either way) at least once: tried last;
        each with its flat moves (value moved from, value moved to).
        A parent move counts only once its child sweeps are told, and only if they changed nothing either."""
        out: dict[str, list[tuple[Any, Any]]] = {}
        by_number = {t.number: t for t in trials}
        for t in trials:
            if t.number in self.moves and t.state == TrialState.COMPLETE and sla_feasible(t) and t.values:
                base = self._from[t.number]
                if not base or abs(t.values[0] - base) >= FLAT * abs(base) or t.number in self._sweep_of:
                    continue
                sweeps = self._sweeps.get(t.number)
                if sweeps is not None and self.conditional:
                    done = [by_number.get(n) for n in sweeps if n >= 0]
                    if len(sweeps) < self.child_moves or any(s is None or not _told(s) for s in done):
                        continue  # children not tried yet: do not judge the parent
                    if any(s is not None and s.state == TrialState.COMPLETE and s.values
                           and abs(s.values[0] - base) >= FLAT * abs(base) for s in done):
                        continue  # a child sweep made the difference: the parent matters
                name, new = self.moves[t.number]
                out.setdefault(name, []).append((self._moved_from.get(t.number), new))
        return out


class _Additive:
    """Ridge regression of log(objective) on the knobs (one-hot choices; a numeric knob's x and x^2 on
    its [0, 1] (log) scale, and whether it is set), over the SLA-feasible trials: an additive (in log,
    multiplicative) model that separates levers tried together, as a per-knob mean cannot."""

    def __init__(self, told: list[FrozenTrial], ridge: float = 1.0, rng: np.random.RandomState | None = None,
                 centre: dict[str, Any] | None = None, width: float = 2.0, scale: float = 1.0) -> None:
        ok = [t for t in told if t.state == TrialState.COMPLETE and sla_feasible(t) and t.values[0] > 0]
        self.dists: dict[str, BaseDistribution] = {}
        for t in told:
            self.dists.update(t.distributions)
        self.told = told
        self.beta = np.zeros(0)
        self.mean = np.zeros(0)  # the posterior mean of the coefficients (beta before any Thompson draw)
        self.cov = np.zeros((0, 0))  # their posterior covariance (unscaled; tuner/search/support.py reads it)
        self.ok, self.resid = ok, np.zeros(len(ok))
        if len(ok) < 2:
            return
        x = np.array([self.features(t.params) for t in ok])
        y = np.log([t.values[0] for t in ok])
        w = np.ones(len(ok)) if centre is None else np.exp(
            -np.array([sum(t.params.get(k) != v for k, v in centre.items()) for t in ok]) / width)
        self.mx, my = (w @ x) / w.sum(), float(w @ y) / w.sum()
        xc = x - self.mx
        a = xc.T @ (w[:, None] * xc) + ridge * np.eye(x.shape[1])
        self.beta = np.linalg.solve(a, xc.T @ (w * (y - my)))
        self.resid = (y - my) - xc @ self.beta  # what the additive fit misses (a narrow peak of a numeric knob)
        self.mean = self.beta.copy()
        s2 = max(float(w @ self.resid**2) / max(w.sum() - 1, 1), 0.01)
        inv = np.linalg.inv(a)
        self.cov = s2 * inv
        if rng is not None:  # Thompson: one draw of the coefficients from their Gaussian posterior
            cov = scale * s2 * inv  # scale < 1: a tighter draw (less noise-driven exploration)
            self.beta = self.beta + np.linalg.cholesky(cov + 1e-12 * np.eye(len(cov))) @ rng.standard_normal(len(cov))

    def features(self, params: dict[str, Any]) -> list[float]:
        out: list[float] = []
        for name, d in sorted(self.dists.items(), key=lambda kv: kv[0]):
            v = params.get(name)
            if isinstance(d, CategoricalDistribution):
                out += [1.0 if v is not None and v == c else 0.0 for c in d.choices]
            else:
                assert isinstance(d, (IntDistribution, FloatDistribution))
                x = to_unit(d, v) if v is not None else 0.0
                out += [float(v is not None), x, x * x]
        return out

    def predict(self, params: dict[str, Any]) -> float:
        if not len(self.beta):
            return 0.0
        return float((np.array(self.features(params)) - self.mx) @ self.beta)

    def local(self, name: str, d: BaseDistribution, v: Any) -> float:
        """Kernel mean of the fit's residuals near `name` = `v` (one zero residual as prior): a peak of a
        numeric knob that x and x^2 under the ridge flatten (a draft length that pays at 4 of 1-16)."""
        w = np.array([_similarity(d, t.params[name], v) if name in t.params else 0.0 for t in self.ok])
        return float(w @ self.resid) / (1.0 + float(w.sum())) if len(w) else 0.0

    def rarity(self, name: str, d: BaseDistribution, v: Any) -> float:
        """1 / sqrt(1 + trials near this value): a bonus for what few trials tried."""
        w = sum(_similarity(d, t.params[name], v) for t in self.told if name in t.params)
        return 1.0 / math.sqrt(1.0 + w)

    def failed(self, name: str, d: BaseDistribution, v: Any) -> float:
        """Share of the launched trials near this value that failed (out of memory, no start), with one
        success as prior: the regression sees only configs that ran, this keeps moves out of failing regions."""
        num, den = 0.0, 1.0
        for t in self.told:
            if name in t.params:
                w = _similarity(d, t.params[name], v)
                num, den = num + w * (t.state == TrialState.FAIL), den + w
        return num / den


def _children(told: list[FrozenTrial]) -> dict[str, set[str]]:
    """Categorical parent -> the knobs it switches, read off the told trials: `k` is a child of `p` when every
    value of `p` seen either always or never comes with `k`, and each side holds a value seen in two trials
    or more. Why those limits: a numeric knob's values are nearly all distinct, so any conditional knob
    would look like its child, and one trial at a value says nothing about the value."""
    names = {k for t in told for k in t.params}
    out: dict[str, set[str]] = {}
    for p in names:
        values: dict[str, list[FrozenTrial]] = {}
        for t in told:
            if p in t.params and isinstance(t.distributions[p], CategoricalDistribution):
                values.setdefault(repr(t.params[p]), []).append(t)
        for k in names - {p}:
            share = [(sum(k in t.params for t in ts) / len(ts), len(ts)) for ts in values.values()]
            if all(x in (0.0, 1.0) for x, _ in share) and any(x == 0.0 and n > 1 for x, n in share) \
                    and any(x == 1.0 and n > 1 for x, n in share):
                out.setdefault(p, set()).add(k)
    return out


def _sibling(study: Study, told: list[FrozenTrial], name: str, v: Any) -> FrozenTrial | None:
    """The best SLA-feasible told trial with `name` at `v`: whose children a move of `name` to `v` copies."""
    return incumbent(study, [t for t in told if t.state == TrialState.COMPLETE and t.params.get(name) == v])


def _active(told: list[FrozenTrial], kid: str, parent: str, v: Any) -> bool:
    """Whether `kid` was asked in a told trial with `parent` at `v` (then the move will ask it too)."""
    return any(t.params.get(parent) == v and kid in t.params for t in told)


def _switched_on(t: FrozenTrial, centre: FrozenTrial, kids: dict[str, set[str]]) -> set[str]:
    """The children of the knobs `t` moved away from `centre` that `t` holds: what a child sweep moves."""
    moved = {k for k, v in t.params.items() if k in kids and centre.params.get(k) != v}
    return {k for p in moved for k in kids[p] if k in t.params and movable(t.distributions[k])}


def _best_value(model: _Additive, params: dict[str, Any], name: str, d: BaseDistribution) -> Any:
    """The value of `name` (of `_candidates`) the model ranks best next to `params`: a move's gain terms,
    plus the residuals near the value."""
    return max(_candidates(model, name, d), key=lambda c: model.predict({**params, name: c}) + model.local(name, d, c)
               + BONUS * model.rarity(name, d, c) - FAIL_WEIGHT * model.failed(name, d, c))


def _candidates(model: _Additive, name: str, d: BaseDistribution) -> list[Any]:
    """Every choice of a categorical; 9 evenly spaced points of a numeric range and the values trials held."""
    if isinstance(d, CategoricalDistribution):
        return list(d.choices)
    assert isinstance(d, (IntDistribution, FloatDistribution))
    return sorted({_from_unit(d, i / 8) for i in range(9)} | {t.params[name] for t in model.told if name in t.params})


def _told(t: FrozenTrial) -> bool:
    """A trial that ran: complete, or a failure at launch (not one the searcher skipped before launch)."""
    if t.state == TrialState.COMPLETE:
        return bool(t.values)
    return t.state == TrialState.FAIL and A_REJECTED not in t.user_attrs and A_DUPLICATE not in t.user_attrs


def _similarity(d: BaseDistribution, a: Any, b: Any) -> float:
    if isinstance(d, CategoricalDistribution):
        return 1.0 if a == b else 0.0
    assert isinstance(d, (IntDistribution, FloatDistribution))
    x = to_unit(d, a) - to_unit(d, b)
    return math.exp(-0.5 * (x / KERNEL) ** 2)


def _neighbours(d: BaseDistribution, v: Any) -> list[Any]:
    """Every other choice of a categorical; ordinal steps of a numeric knob (large, then small)."""
    if isinstance(d, CategoricalDistribution):
        return [c for c in d.choices if c != v]
    assert isinstance(d, (IntDistribution, FloatDistribution))
    out: list[Any] = []
    for step in (0.25, -0.25, 0.125, -0.125) if not d.log else (4.0, 0.25, 2.0, 0.5):
        raw = v * step if d.log else v + step * (d.high - d.low)
        if not d.low <= raw <= d.high:
            continue
        new = snap(d, raw)
        if new != v and new not in out:
            out.append(new)
    return out


def _from_unit(d: IntDistribution | FloatDistribution, u: float) -> Any:
    u = min(max(u, 0.0), 1.0)
    x = math.exp(math.log(d.low) + u * (math.log(d.high) - math.log(d.low))) if d.log else d.low + u * (d.high - d.low)
    return snap(d, x)


def _key(params: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, repr(v)) for k, v in params.items()))

