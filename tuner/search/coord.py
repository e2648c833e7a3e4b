"""Single-knob moves of the incumbent ranked by a model, on multivariate TPE (`search.algorithm: tpe-coord`).

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
  changed the objective by < FLAT tried last. A knob a moved parent switches on is drawn by TPE.
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
                 constant_liar: bool = True) -> None:
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
        if len(study.directions) > 1 or math.floor(g * p + 1e-9) == math.floor((g - 1) * p + 1e-9):
            return  # a TPE draw (multi-objective studies: TPE only)
        plan = self._best_move(study, trial)
        if plan is not None:
            self._plans[trial.number] = plan

    def sample_independent(self, study: Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        row = self._design.get(trial.number)
        if row is not None:
            return self._designed(param_name, param_distribution, row)
        return super().sample_independent(study, trial, param_name, param_distribution)

    def infer_relative_search_space(self, study: Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        if trial.number in self._design:
            return {}
        return super().infer_relative_search_space(study, trial)

    def after_trial(self, study: Study, trial: FrozenTrial, state: TrialState, values: Any) -> None:
        self._design.pop(trial.number, None)
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

    def _best_move(self, study: Study, trial: FrozenTrial) -> dict[str, Any] | None:
        trials = study.get_trials(deepcopy=False)
        told = [t for t in trials if _told(t)]
        best = incumbent(study, [t for t in told if t.state == TrialState.COMPLETE])
        if best is None:
            return None
        centre = next((t for t in told if t.number == self._centre), None)
        if centre is not None and best.values[0] < centre.values[0] * (1 + FLAT):
            best = centre  # not better by FLAT: keep sweeping the same point's moves rather than restart on noise
        self._centre = best.number
        model = _Additive(told, rng=self._rng if self.thompson else None,
                          centre=best.params if self.local > 0 else None, width=self.local)
        seen = {_key(t.params) for t in trials if t.number != trial.number}
        seen |= {_key(p) for n, p in self._plans.items() if n != trial.number}
        here = model.predict(best.params)
        flat = self._flat(trials)
        ranked: list[tuple[float, float, str, Any]] = []
        for name, d in best.distributions.items():
            if not movable(d):
                continue
            for v in _neighbours(d, best.params[name]):
                plan = {**best.params, name: v}
                if _key(plan) in seen:
                    continue
                old = best.params[name]
                gain = (model.predict(plan) - here + BONUS * (model.rarity(name, d, v) - model.rarity(name, d, old))
                        - FAIL_WEIGHT * (model.failed(name, d, v) - model.failed(name, d, old)))
                if name in flat:
                    gain -= FLAT_PENALTY
                ranked.append((gain if self.ranked else 0.0, float(self._rng.uniform()), name, v))
        if not ranked:
            return None
        _, _, name, v = max(ranked)
        self.moves[trial.number] = (name, v)
        self._from[trial.number] = best.values[0]
        return {**best.params, name: v}

    def _flat(self, trials: list[FrozenTrial]) -> set[str]:
        """Knobs whose move changed the objective by less than FLAT (either way) at least once: tried last."""
        out = set()
        for t in trials:
            if t.number in self.moves and t.state == TrialState.COMPLETE and sla_feasible(t) and t.values:
                base = self._from[t.number]
                if base and abs(t.values[0] - base) < FLAT * abs(base):
                    out.add(self.moves[t.number][0])
        return out


class _Additive:
    """Ridge regression of log(objective) on the knobs (one-hot choices; a numeric knob's x and x^2 on
    its [0, 1] (log) scale, and whether it is set), over the SLA-feasible trials: an additive (in log,
    multiplicative) model that separates levers tried together, as a per-knob mean cannot."""

    def __init__(self, told: list[FrozenTrial], ridge: float = 1.0, rng: np.random.RandomState | None = None,
                 centre: dict[str, Any] | None = None, width: float = 2.0) -> None:
        ok = [t for t in told if t.state == TrialState.COMPLETE and sla_feasible(t) and t.values[0] > 0]
        self.dists: dict[str, BaseDistribution] = {}
        for t in told:
            self.dists.update(t.distributions)
        self.told = told
        self.beta = np.zeros(0)
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
        if rng is not None:  # Thompson: one draw of the coefficients from their Gaussian posterior
            resid = (y - my) - xc @ self.beta
            s2 = max(float(w @ resid**2) / max(w.sum() - 1, 1), 0.01)
            cov = s2 * np.linalg.inv(a)
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

