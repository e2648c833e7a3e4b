"""SMAC-style sampler: a random-forest surrogate with expected improvement (`search.algorithm: rf`).

Why: on the levers space (benchmarks/search_efficiency.py) random search reaches the FP8 basin within
about 10 trials and what is left is a one- or two-knob corner whose right value depends on the other
knobs (the token budget and the CUDA-graph size together). Independent TPE models each knob alone; a
random forest over all trials models the interactions, and expected improvement over its trees'
spread weighs "probably better" against "not tried near here". The acquisition is maximised over the
one- and two-knob neighbours of the best trials (greedy steps, the moves of tuner/search/planned.py)
and a pool of random configs; every `random_every`-th guided trial is a random config (exploration).

The chosen config is planned in `before_trial` and handed out knob by knob in `sample_independent`,
so Optuna records a normal trial (storage, resume, dashboards). Given the study's `Space`, candidates
drop the knobs their choices switch off, and are repaired by the space's constraints and compared with
every config already tried, so a plan is not a duplicate the searcher would skip. Pending trials
(2 at a time) enter the forest at the worst value seen (constant liar). Seeded: deterministic.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.samplers import RandomSampler
from optuna.study import Study, StudyDirection
from optuna.trial import FrozenTrial, TrialState
from sklearn.ensemble import RandomForestRegressor

from tuner.search.attrs import A_OUTCOME
from tuner.search.feasibility import config_key
from tuner.search.planned import PlannedSampler, movable, move, sla_feasible, snap, to_unit
from tuner.search.space import Rejected, Space

RF_STARTUP = 6  # completed trials (the baseline counts) before the forest guides: a cap on the study's n_startup_trials
INACTIVE = -0.5  # a numeric knob its parent switched off, in the forest's [0, 1] coordinates


class RFSampler(PlannedSampler):
    """Random forest + EI after `n_startup_trials` completed trials (the baseline counts)."""

    def __init__(self, *, seed: int | None = None, space: Space | None = None, n_startup_trials: int = 6,
                 random_every: int = 4, n_trees: int = 48, n_random: int = 400, n_starts: int = 5,
                 local_steps: int = 4, n_pairs: int = 24, distinct: bool = False) -> None:
        super().__init__(RandomSampler(seed=seed), seed)
        self.space = space
        self.n_startup_trials, self.random_every, self.n_trees = n_startup_trials, random_every, n_trees
        self.n_random, self.n_starts, self.local_steps, self.n_pairs = n_random, n_starts, local_steps, n_pairs
        self.distinct = distinct  # skip candidates equal to a tried config on the knobs the forest uses
        self.planned = 0  # trials the forest chose (the rest: startup, interleaved random, fallbacks)

    # ------------------------------------------------------------------ planning

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        if "fixed_params" in trial.system_attrs:  # enqueued (a baseline, a warm start): nothing to plan
            return
        trials = study.get_trials(deepcopy=False)
        done = [t for t in trials if t.state == TrialState.COMPLETE]
        if len(done) < self.n_startup_trials:
            return
        running = [t for t in trials if t.state == TrialState.RUNNING and t.number != trial.number]
        # launched trials since the startup: a skipped plan (FAIL, never launched) does not advance it
        if self.random_every and (len(done) + len(running) - self.n_startup_trials) % self.random_every \
                == self.random_every - 1:
            return
        plan = self._propose(study, trials, done, running)
        if plan is not None:
            self._plans[trial.number] = plan
            self.planned += 1

    def _propose(self, study: Study, trials: list[FrozenTrial], done: list[FrozenTrial],
                 running: list[FrozenTrial]) -> dict[str, Any] | None:
        dists: dict[str, BaseDistribution] = {}
        for t in trials:
            dists.update(t.distributions)
        names = [n for n, d in sorted(dists.items()) if movable(d)]
        if not names:
            return None
        enc = _Encoder({n: dists[n] for n in names})
        sign = 1.0 if study.direction == StudyDirection.MAXIMIZE else -1.0
        obs = [(t.params, sign * t.values[0], sla_feasible(t))
               for t in done if t.values]
        ys = [y for _, y, _ in obs]
        feasible = [y for _, y, ok in obs if ok]
        if not feasible:
            return None  # nothing to improve on yet: a random draw (the caller falls back)
        worst = min(ys)
        crashed = [t.params for t in trials if t.state == TrialState.FAIL and A_OUTCOME in t.user_attrs]
        rows = [(p, y if ok else worst) for p, y, ok in obs] + [(p, worst) for p in crashed] \
            + [(t.params, worst) for t in running]  # constant liar: pending trials at the worst value
        x = np.array([enc.encode(self._active(p)) for p, _ in rows])
        y = np.array([v for _, v in rows])
        scale = float(y.std()) or 1.0
        y = (y - y.mean()) / scale
        best = float(max(y[i] for i, (_, _, ok) in enumerate(obs) if ok))
        forest = RandomForestRegressor(n_estimators=self.n_trees, max_features=0.8, min_samples_leaf=1,
                                       bootstrap=True, random_state=int(self._rng.randint(2**31 - 1)))
        forest.fit(x, y)

        tried = {k for t in trials if t.params and (k := self._key(t.params)) is not None}
        cands: dict[Any, dict[str, Any]] = {}

        def add(p: dict[str, Any]) -> Any:
            p = self._active(p)
            k = self._key(p)
            if k is not None and k not in tried and k not in cands:
                cands[k] = p
            return k

        def acq(ps: list[dict[str, Any]]) -> np.ndarray:
            xs = np.array([enc.encode(p) for p in ps])
            per_tree = np.stack([tr.predict(xs) for tr in forest.estimators_])
            return _ei(per_tree.mean(axis=0), per_tree.std(axis=0), best)

        for _ in range(self.n_random):
            add(enc.random(self._rng))
        top = sorted((o for o in obs if o[2]), key=lambda o: -o[1])[: self.n_starts]
        for start, _, _ in top:  # greedy steps on the acquisition through one- and two-knob neighbours
            cur = dict(start)
            cur_val = -math.inf
            for _ in range(self.local_steps):
                nbrs = [self._active(n) for n in self._neighbours(cur, enc)]
                nbrs = [n for n in nbrs if add(n) is not None]
                if not nbrs:
                    break
                vals = acq(nbrs)
                i = int(np.argmax(vals))
                if vals[i] <= cur_val:
                    break
                cur, cur_val = nbrs[i], float(vals[i])
        if not cands:
            return None
        pool = list(cands.values())
        if self.distinct:
            sig = _Signature(enc, forest.feature_importances_)
            seen = {sig(self._active(t.params)) for t in trials if t.params}
            pool = [p for p in pool if sig(p) not in seen] or pool
        vals = acq(pool) + self._rng.uniform(0, 1e-12, len(pool))  # seeded tie-break
        return pool[int(np.argmax(vals))]

    def _neighbours(self, params: dict[str, Any], enc: _Encoder) -> list[dict[str, Any]]:
        """Every one-knob move (each other choice; up and down a step) and `n_pairs` random two-knob moves."""
        full = {n: params.get(n, enc.default(n, self._rng)) for n in enc.dists}
        out: list[dict[str, Any]] = []
        for n, d in enc.dists.items():
            if isinstance(d, CategoricalDistribution):
                out += [{**full, n: c} for c in d.choices if c != full[n]]
            else:
                out += [{**full, n: move(d, full[n], self._rng)} for _ in range(2)]
        names = list(enc.dists)
        for _ in range(self.n_pairs if len(names) > 1 else 0):
            a, b = self._rng.choice(len(names), size=2, replace=False)
            p = dict(full)
            for n in (names[a], names[b]):
                p[n] = move(enc.dists[n], p[n], self._rng)
            out.append(p)
        return out

    # ------------------------------------------------------------------ the space, when known

    def _active(self, params: dict[str, Any]) -> dict[str, Any]:
        """`params` without the knobs their parents switch off (all of them when the space is unknown)."""
        if self.space is None:
            return dict(params)
        engine = params.get("engine", next(iter(self.space.engines)))
        sp = self.space.engines.get(engine)
        if sp is None:
            return dict(params)
        pre = f"{engine}."
        values = {k[len(pre):]: v for k, v in params.items() if k.startswith(pre)}
        keep: dict[str, Any] = {}
        for name in sp.params:  # in the space's order, as Space.sample decides
            if name in values and sp.active(name, keep):
                keep[name] = values[name]
        out = {f"{pre}{k}": v for k, v in keep.items()}
        if "engine" in params:
            out["engine"] = engine
        return out

    def _key(self, params: dict[str, Any]) -> Any:
        """The launched config's identity as the searcher dedups it (None: the constraints reject it)."""
        if self.space is None:
            return repr(sorted(params.items()))
        engine = params.get("engine", next(iter(self.space.engines)))
        sp = self.space.engines.get(engine)
        if sp is None:
            return repr(sorted(params.items()))
        pre = f"{engine}."
        values = {k[len(pre):]: (round(v, 6) if isinstance(v, float) else v)
                  for k, v in params.items() if k.startswith(pre)}
        try:
            args, _ = sp.apply_constraints(values)
        except Rejected:
            return None
        return config_key(engine, {**sp.defaults(), **args})


class _Encoder:
    """Params as a vector: numeric knobs in [0, 1] (log-scaled where the knob is), categoricals one-hot."""

    def __init__(self, dists: dict[str, BaseDistribution]) -> None:
        self.dists = dists

    def encode(self, params: dict[str, Any]) -> list[float]:
        out: list[float] = []
        for n, d in self.dists.items():
            v = params.get(n)
            if isinstance(d, CategoricalDistribution):
                out += [1.0 if v is not None and v == c else 0.0 for c in d.choices]
            else:
                out.append(INACTIVE if v is None else to_unit(d, v))
        return out

    def random(self, rng: np.random.RandomState) -> dict[str, Any]:
        return {n: _draw(d, rng) for n, d in self.dists.items()}

    def default(self, name: str, rng: np.random.RandomState) -> Any:
        return _draw(self.dists[name], rng)


class _Signature:
    """A config on the knobs that matter to the forest (at least half a uniform share of its importance),
    numeric knobs in eighths of their (log) range: two configs alike here are one config to the model,
    so trying the second teaches it next to nothing (a moved knob it found flat, a nudge)."""

    BINS = 8

    def __init__(self, enc: _Encoder, importances: np.ndarray) -> None:
        self.dists, per, i = enc.dists, {}, 0
        for n, d in enc.dists.items():
            w = len(d.choices) if isinstance(d, CategoricalDistribution) else 1
            per[n] = float(importances[i:i + w].sum())
            i += w
        self.names = [n for n, v in per.items() if v >= 0.5 / len(per)]

    def __call__(self, params: dict[str, Any]) -> tuple[Any, ...]:
        out: list[Any] = []
        for n in self.names:
            v, d = params.get(n), self.dists[n]
            if v is None or isinstance(d, CategoricalDistribution):
                out.append(repr(v))
            else:
                out.append(min(int(to_unit(d, v) * self.BINS), self.BINS - 1))
        return tuple(out)


def _draw(d: BaseDistribution, rng: np.random.RandomState) -> Any:
    """A uniform draw (on the log scale for a log knob), on the knob's step."""
    if isinstance(d, CategoricalDistribution):
        return d.choices[int(rng.randint(len(d.choices)))]
    assert isinstance(d, (IntDistribution, FloatDistribution))
    if d.log:
        v = math.exp(rng.uniform(math.log(d.low), math.log(d.high)))
    else:
        v = rng.uniform(d.low, d.high)
    return snap(d, v)


def _ei(mu: np.ndarray, sd: np.ndarray, best: float) -> np.ndarray:
    """Expected improvement over `best` (maximising); a zero spread gives the plain improvement."""
    sd = np.maximum(sd, 1e-9)
    z = (mu - best) / sd
    cdf = 0.5 * (1.0 + np.vectorize(math.erf)(z / math.sqrt(2.0)))
    pdf = np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    return np.asarray((mu - best) * cdf + sd * pdf)
