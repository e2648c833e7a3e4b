"""Whole configs chosen by a Thompson draw of an additive model of log(objective) (`search.algorithm: tpe-add`).

Why: on the lever space (benchmarks/search_efficiency.py) the objective is close to a product of per-knob
factors (docs/search.md: every lever pays alone; the best draft length depends on the workload, not on the
other knobs), and the configs within 95 % of the optimum need several levers at once. A model that is
additive in log(objective) learns every knob from every trial, and the best config under it is the best
level of each knob, so it can move several knobs at once where single-knob moves (tpe-coord) walk one at a
time and TPE re-draws the basin.

- **Model**: Bayesian ridge regression of log(objective) on one-hot levels: every choice of a categorical, and
  `BINS` equal bins of a numeric knob's [0, 1] (log) range (a bin per level, so a peak such as a draft length
  that pays at 4 of 1-16 is not flattened by a quadratic). A knob its parent switches off has no level.
  SLA-feasible trials at their value; SLA-violated ones `VIOLATED_PENALTY` below theirs.
- **Failures** (out of memory, no start) are not in the regression: each level pays `FAIL_WEIGHT` x the share of
  launched trials at that level that failed (one success as prior), summed over the knobs.
- **Choice**: coefficients drawn once per trial from their Gaussian posterior (Thompson: an uncertain level gets
  its turn); the candidate with the best drawn score that no launched or pending trial holds (same levels):
  the exact argmax of the draw (each knob's best level, per value of each parent), random configs, and every
  one-knob and random two-knob neighbour of the best trials.
- **Start and TPE**: `n_startup_trials` random trials after the baseline, then `1 - model_share` of the guided
  trials are multivariate grouped TPE's draws (an outside view the additive model cannot give: interactions).

Reads only the trials it is told and the distributions Optuna passes (no benchmark levels, no simulator).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.samplers import TPESampler
from optuna.study import Study
from optuna.trial import FrozenTrial, TrialState

from tuner.search.coord import _children, _from_unit, _told
from tuner.search.planned import PlannedSampler, movable, sla_feasible, to_unit

ADD_STARTUP = 6  # random start trials (a cap on the study's n_startup_trials)
BINS = 4  # levels of a numeric knob in the model
FAIL_WEIGHT = 1.0  # a level whose every trial failed costs this much log(objective)
VIOLATED_PENALTY = 0.5  # an SLA-violated trial counts this far (log) below its told objective
RANDOM_CANDIDATES = 600  # random configs scored per choice, beside the argmax and the neighbours
NOISE = 0.01  # floor of the posterior's noise variance (log objective squared): how far Thompson explores
TOP = 3  # the best trials whose neighbours are candidates
Level = tuple[str, Any]  # (knob, choice or bin index)


class AdditiveSampler(PlannedSampler):
    """Random start, then the best untried config under a Thompson draw of an additive model, interleaved
    with multivariate TPE draws."""

    def __init__(self, *, seed: int | None = None, n_startup_trials: int = ADD_STARTUP, model_share: float = 2 / 3,
                 ridge: float = 1.0, bins: int = BINS, thompson: bool = True, noise: float = NOISE,
                 constant_liar: bool = True) -> None:
        self._tpe = TPESampler(seed=seed, n_startup_trials=n_startup_trials, constant_liar=constant_liar,
                               multivariate=True, group=True)
        super().__init__(self._tpe, seed)
        self.n_startup_trials, self.model_share, self.ridge, self.bins = n_startup_trials, model_share, ridge, bins
        self.thompson, self.noise = thompson, noise
        self._started = 0  # start trials handed out
        self._guided = 0  # trials handed out after the start

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        self._tpe.before_trial(study, trial)
        if "fixed_params" in trial.system_attrs:  # enqueued (a baseline, a warm start): nothing to plan
            return
        if self._started < self.n_startup_trials:
            self._started += 1
            return
        self._guided += 1
        g, p = self._guided, self.model_share
        if len(study.directions) > 1 or math.floor(g * p + 1e-9) == math.floor((g - 1) * p + 1e-9):
            return  # a TPE draw (multi-objective studies: TPE only)
        plan = self._plan(study)
        if plan is not None:
            self._plans[trial.number] = plan

    # ------------------------------------------------------------------ the plan

    def _plan(self, study: Study) -> dict[str, Any] | None:
        trials = study.get_trials(deepcopy=False)
        told = [t for t in trials if _told(t)]
        model = _Model(told, self.bins, self.ridge, self._rng if self.thompson else None, self.noise)
        if not model.ready:
            return None
        taken = {model.signature(t.params) for t in trials
                 if _told(t) or (t.state == TrialState.RUNNING and t.params)}
        best = None
        for cand in self._candidates(told, model):
            sig = model.signature(cand)
            if sig in taken:
                continue
            taken.add(sig)
            score = model.score(cand)
            if best is None or score > best[0]:
                best = (score, cand)
        return best[1] if best else None

    def _candidates(self, told: list[FrozenTrial], model: _Model) -> list[dict[str, Any]]:
        out = [model.argmax(self._rng)]
        out += [model.random(self._rng) for _ in range(RANDOM_CANDIDATES)]
        done = [t for t in told if t.state == TrialState.COMPLETE and t.values and sla_feasible(t)]
        for t in sorted(done, key=lambda t: -t.values[0])[:TOP]:
            base = model.complete(dict(t.params), self._rng)
            for name in model.names:
                for lv in model.levels(name):
                    out.append(model.with_level(base, name, lv, self._rng))
            for _ in range(40):  # two-knob neighbours
                c = base
                for name in self._rng.choice(model.names, size=min(2, len(model.names)), replace=False):
                    lvs = model.levels(str(name))
                    c = model.with_level(c, str(name), lvs[int(self._rng.randint(len(lvs)))], self._rng)
                out.append(c)
        return out


class _Model:
    """The additive model of one choice: its levels, its (drawn) coefficients and failure shares."""

    def __init__(self, told: list[FrozenTrial], bins: int, ridge: float, rng: np.random.RandomState | None,
                 noise: float) -> None:
        self.bins = bins
        self.dists: dict[str, BaseDistribution] = {}
        for t in told:
            self.dists.update({k: d for k, d in t.distributions.items() if movable(d)})
        self.names = sorted(self.dists)
        self.kids = _children(told)
        self.told = told
        self.columns: dict[Level, int] = {}
        for name in self.names:
            for lv in self.levels(name):
                self.columns[(name, lv)] = len(self.columns)
        rows, ys = [], []
        ok = [t for t in told if t.state == TrialState.COMPLETE and t.values and t.values[0] > 0]
        for t in ok:
            rows.append(self.x(t.params))
            ys.append(math.log(t.values[0]) - (0.0 if sla_feasible(t) else VIOLATED_PENALTY))
        self.ready = sum(sla_feasible(t) for t in ok) >= 2
        self.beta = np.zeros(len(self.columns))
        self.fail = self._fail_shares()
        if not self.ready:
            return
        x, y = np.array(rows), np.array(ys)
        self.mx, my = x.mean(axis=0), float(y.mean())
        xc = x - self.mx
        a = xc.T @ xc + ridge * np.eye(x.shape[1])
        self.beta = np.linalg.solve(a, xc.T @ (y - my))
        if rng is not None:  # Thompson: one draw of the coefficients from their Gaussian posterior
            resid = (y - my) - xc @ self.beta
            s2 = max(float(resid @ resid) / max(len(y) - 1, 1), noise)
            cov = s2 * np.linalg.inv(a)
            self.beta = self.beta + np.linalg.cholesky(cov + 1e-12 * np.eye(len(cov))) @ rng.standard_normal(len(cov))

    # ------------------------------------------------------------------ levels

    def levels(self, name: str) -> list[Any]:
        d = self.dists[name]
        return list(d.choices) if isinstance(d, CategoricalDistribution) else list(range(self.bins))

    def level(self, name: str, v: Any) -> Any:
        d = self.dists[name]
        if isinstance(d, CategoricalDistribution):
            return v
        return min(int(to_unit(d, v) * self.bins), self.bins - 1)

    def value(self, name: str, lv: Any, rng: np.random.RandomState, keep: Any = None) -> Any:
        """A value of `name` at level `lv`: `keep` if it is there already, else a random one inside the bin."""
        d = self.dists[name]
        if isinstance(d, CategoricalDistribution):
            return lv
        if keep is not None and self.level(name, keep) == lv:
            return keep
        assert isinstance(d, (IntDistribution, FloatDistribution))
        for _ in range(8):  # a bin narrower than the knob's step may snap outside: draw again, else its centre
            v = _from_unit(d, (lv + rng.uniform()) / self.bins)
            if self.level(name, v) == lv:
                return v
        return _from_unit(d, (lv + 0.5) / self.bins)

    # ------------------------------------------------------------------ which knobs a config asks

    def active(self, params: dict[str, Any]) -> dict[str, Any]:
        """`params` without the knobs its parents switch off (as seen in the told trials)."""
        off = {k for p, ks in self.kids.items() if p in params for k in ks
               if any(t.params.get(p) == params[p] for t in self.told)
               and not any(t.params.get(p) == params[p] and k in t.params for t in self.told)}
        return {k: v for k, v in params.items() if k not in off}

    def complete(self, params: dict[str, Any], rng: np.random.RandomState) -> dict[str, Any]:
        """`params` with a random value for every known knob it lacks, then cut to what it asks."""
        for name in self.names:
            if name not in params:
                lvs = self.levels(name)
                params[name] = self.value(name, lvs[int(rng.randint(len(lvs)))], rng)
        return self.active(params)

    def with_level(self, base: dict[str, Any], name: str, lv: Any, rng: np.random.RandomState) -> dict[str, Any]:
        return self.complete({**base, name: self.value(name, lv, rng, base.get(name))}, rng)

    def random(self, rng: np.random.RandomState) -> dict[str, Any]:
        return self.complete({}, rng)

    def argmax(self, rng: np.random.RandomState) -> dict[str, Any]:
        """Each knob at its best drawn level; a parent's value judged with its children's best levels."""
        best = {n: max(self.levels(n), key=lambda lv, n=n: self._gain(n, lv)) for n in self.names}
        for p, ks in self.kids.items():
            if p not in self.dists or not isinstance(self.dists[p], CategoricalDistribution):
                continue
            def whole(c: Any, p: str = p, ks: set[str] = ks) -> float:
                on = self.active({**best, p: c})
                return self._gain(p, c) + sum(self._gain(k, best[k]) for k in ks if k in on and k in self.dists)
            best[p] = max(self.levels(p), key=whole)
        return self.active({n: self.value(n, lv, rng) for n, lv in best.items()})

    # ------------------------------------------------------------------ scores

    def x(self, params: dict[str, Any]) -> list[float]:
        row = [0.0] * len(self.columns)
        for name, v in params.items():
            if name in self.dists:
                col = self.columns.get((name, self.level(name, v)))
                if col is not None:
                    row[col] = 1.0
        return row

    def _gain(self, name: str, lv: Any) -> float:
        col = self.columns[(name, lv)]
        return float(self.beta[col]) - FAIL_WEIGHT * self.fail.get((name, lv), 0.0)

    def score(self, params: dict[str, Any]) -> float:
        return sum(self._gain(n, self.level(n, v)) for n, v in params.items() if n in self.dists)

    def signature(self, params: dict[str, Any]) -> tuple[tuple[str, str], ...]:
        return tuple(sorted((n, repr(self.level(n, v))) for n, v in params.items() if n in self.dists))

    def _fail_shares(self) -> dict[Level, float]:
        num: dict[Level, float] = {}
        den: dict[Level, float] = {}
        for t in self.told:
            for n, v in t.params.items():
                if n in self.dists:
                    lv = (n, self.level(n, v))
                    num[lv] = num.get(lv, 0.0) + (t.state == TrialState.FAIL)
                    den[lv] = den.get(lv, 1.0) + 1.0
        return {lv: num[lv] / den[lv] for lv in num}

