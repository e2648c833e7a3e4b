"""The SLA-constrained Optuna search, usable with or without Ray Tune.

`SearchCore` drives an Optuna study by ask/tell: baseline first, known constraints repaired or
rejected before launch, configs the feasibility model predicts cannot run skipped, duplicates never
relaunched, and each finished trial told with its SLA violations attached by `Trial.set_constraint`
(Optuna 5; Ray Tune's OptunaSearch passes objective values only, hence our own Searcher).
`make_core` builds it from a study; it imports no Ray (the local executor uses it as it is).
`ConstrainedSearcher` and `make_searcher` (tuner.search.tune_searcher) are its thin Ray Tune face.

The Optuna study lives in the output folder's `optuna.db` (Optuna's own RDB storage), so
optuna-dashboard and Optuna's plots read it, and `--resume` continues from it (tuner.search.resume).
Each launched trial carries `servetune.*` user attributes (number, engine, args, Tune trial id,
outcome) that tie it to its row in trials.parquet and its MLflow run.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace
from typing import Any, Literal

import optuna

from tuner.common.numeric import finite_float
from tuner.search.ask_tell import Suggestion, TrialReport
from tuner.search.attrs import (
    A_ARGS,
    A_BASELINE,
    A_CAPACITY,
    A_DUPLICATE,
    A_ENGINE,
    A_NOTES,
    A_NUMBER,
    A_OUTCOME,
    A_PARAMS,
    A_REASON,
    A_REJECTED,
    A_TRIAL_ID,
)
from tuner.search.coord import COORD_STARTUP
from tuner.search.coord_polish import STALL, STALL_END, UNTESTED, CoordPolishSampler
from tuner.search.feasibility import FeasibilityModel, config_key
from tuner.search.local_tpe import LocalTPESampler
from tuner.search.rf_sampler import RF_STARTUP, RFSampler
from tuner.search.space import Rejected, Space
from tuner.spec.study import Study
from tuner.trial.outcome import TrialOutcome

_SWITCH_TO_RANDOM_AFTER = 20  # skipped samples in a row before a random fallback draws the next one


def make_sampler(study: Study, space: Space, offset: int = 0) -> optuna.samplers.BaseSampler:
    """The study's sampler, seeded by the study seed (TPE with constant liar for parallel trials).

    `offset` (the trials already in a resumed study) moves the seed, so a resumed study's random
    draws do not replay the first run's (they would only be skipped as duplicates).
    """
    algo, seed = study.search.algorithm, study.seed + offset
    if algo == "tpe-local":  # TPE + neighbour moves around the incumbent (the default before search39; docs/search.md)
        return LocalTPESampler(seed=seed, n_startup_trials=study.search.n_startup_trials)
    if algo == "tpe-coord":  # single-knob moves of the incumbent ranked by a model, + multivariate TPE (docs/search.md:
        # near failures, tighter draw, untested moves, the space's minor knobs last, halves; search39's fresh seeds;
        # an out-of-memory move retried with the memory knobs lower: search41's; the midpoint of a coarse numeric
        # move that made the incumbent: search44's; the incumbent's levers after 8 trials without a gain: search46's,
        # and in the last 6 trials of the budget: search47's)
        return CoordPolishSampler.chosen(seed=seed, n_startup_trials=min(study.search.n_startup_trials, COORD_STARTUP),
                                         untested=UNTESTED, minor=space.minor(), halves=True, relief=space.memory(),
                                         bracket="half", levers=space.levers(), stall=STALL,
                                         stall_end=STALL_END, budget=study.budget.trials)
    if algo == "rf":  # random forest + EI, local search around the best trials (tuner/search/rf_sampler.py)
        return RFSampler(seed=seed, space=space, n_startup_trials=min(study.search.n_startup_trials, RF_STARTUP))
    if algo == "tpe":
        # Independent (univariate) TPE: on the default study's plateaus (capacity is quantised by the
        # load grid) multivariate TPE locked onto a flat region in 2 of 10 seeds, independent TPE in none
        # (docs/search.md). It also handles conditional and joint spaces without grouping.
        return optuna.samplers.TPESampler(
            seed=seed, n_startup_trials=study.search.n_startup_trials, constant_liar=True, multivariate=False,
        )
    if algo == "nsga2":
        pop = max(4, min(20, study.budget.trials // 3))
        return optuna.samplers.NSGAIISampler(seed=seed, population_size=pop)
    return optuna.samplers.RandomSampler(seed=seed)  # random, and grid's sampler for anything unqueued


class SearchCore:
    """Ask/tell over an Optuna study with baseline, constraints, feasibility learning and dedup."""

    def __init__(self, study: Study, space: Space, *, sampler: optuna.samplers.BaseSampler | None = None,
                 storage: optuna.storages.BaseStorage | str | None = None, max_resample: int = 200,
                 grid_points: int = 3, gate: Any = None) -> None:
        self.study, self.space = study, space
        self.gate = gate  # a tuner.search.study_gate.StudyGate: simulator first, real trial only if it could win
        self.multi = study.objective.mode == "multi"
        directions: list[Literal['maximize', 'minimize']] = ["maximize", "minimize"] if self.multi else ["maximize"]
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.optuna = optuna.create_study(study_name=study.name, storage=storage, load_if_exists=True,
                                          directions=directions, sampler=sampler or make_sampler(study, space))
        if sampler is None and (n := len(self.optuna.get_trials(deepcopy=False))):
            self.optuna.sampler = make_sampler(study, space, offset=n)
        self._random = optuna.samplers.RandomSampler(seed=study.seed + 1)
        self.max_resample = max_resample
        self.feasibility = (FeasibilityModel(space.engines, seed=study.seed)
                            if study.search.learn_failures else None)
        self.rejected: list[dict[str, Any]] = []  # never launched: engine, params, reason
        self.duplicates = 0  # samples equal to a config already launched (skipped)
        self.history: list[dict[str, Any]] = []  # one row per finished trial
        self._baselines = list(space.engines) if study.search.baseline_first else []
        self._grid = self._grid_queue(grid_points) if study.search.algorithm == "grid" else None
        self._configs: dict[int, Suggestion] = {}
        self._trials: dict[int, optuna.Trial | None] = {}
        self._running: dict[tuple[str, str], int] = {}
        self._done: dict[tuple[str, str], int] = {}
        self._next = 0
        self._free: list[int] = []  # numbers of interrupted trials below _next (resume): reused first
        self._warm: list[dict[str, Any]] = []

    def warm_start(self, configs: list[tuple[str, dict[str, Any]]]) -> None:
        """Launch these (engine, params) first after the baseline (e.g. pre-screened on the simulator)."""
        for engine, params in configs:
            self._warm.append(self._prefixed(engine, params))

    def _prefixed(self, engine: str, params: dict[str, Any]) -> dict[str, Any]:
        """(engine, params) as the Optuna params of this study (`<engine>.<knob>`, `engine` when joint)."""
        fixed = {f"{engine}.{k}": v for k, v in params.items()}
        if self.space.joint:
            fixed["engine"] = engine
        return fixed

    def resume(self, done: list[Any]) -> list[Any]:
        """Continue from the Optuna storage after a stopped driver; returns trials only Optuna recorded.

        `done` are the TrialResults of trials.parquet. See tuner.search.resume for the rules.
        """
        from tuner.search.resume import resume_core

        return resume_core(self, done)

    def continue_numbering(self, taken: Iterable[int]) -> None:
        """Number new trials after a resume: the numbers in `taken` (finished trials) stay theirs, the
        free ones below the highest (interrupted trials) are handed out first, then numbering goes on
        after the highest. Why: a trial number names one row of trials.parquet and one MLflow run, and
        an interrupted trial's re-run should take its number back rather than leave a gap (fresh-clone
        CI on e26bece numbered a re-run baseline 2 and left 0 unused)."""
        used = set(taken)
        self._next = max(used) + 1 if used else 0
        self._free = sorted(set(range(self._next)) - used)

    # ---------------------------------------------------------------- ask

    def ask(self) -> Suggestion | None:
        """The next config to launch, or None when the space has nothing left worth launching."""
        if self._baselines:
            return self._baseline(self._baselines.pop(0))
        if self._warm:
            self.optuna.enqueue_trial(self._warm.pop(0), user_attrs={"warm_start": True}, skip_if_exists=False)
        elif self.gate is not None and self._grid is None:
            # the simulator's best pooled config that could still beat the incumbent goes first
            pick = self.gate.propose(self.incumbent(), lambda key: key in self._running or key in self._done)
            if pick is not None:
                self.optuna.enqueue_trial(self._prefixed(*pick), user_attrs={"sim_gate_proposed": True},
                                          skip_if_exists=False)
        skipped = 0
        for _ in range(self.max_resample):
            if self._grid is not None:
                if not self._grid:
                    return None
                self.optuna.enqueue_trial(self._grid.pop(0), skip_if_exists=False)
            fallback = skipped >= _SWITCH_TO_RANDOM_AFTER and self._grid is None
            trial, engine, values = self._sample(fallback)
            cfg = self._vet(trial, engine, {k: _tidy(v) for k, v in values.items()})
            if cfg is not None:
                return cfg
            skipped += 1
            if self.gate is not None and self.gate.skips_in_a_row >= self.study.search.sim_gate.max_skips:
                return None  # the simulator rules out every candidate lately: nothing left worth a real trial
        return None

    def ask_batch(self, n: int) -> list[Suggestion]:
        """Up to `n` configs to run side by side (fewer when the space has nothing left)."""
        batch: list[Suggestion] = []
        while len(batch) < n and (cfg := self.ask()) is not None:
            batch.append(cfg)
        return batch

    def _sample(self, fallback: bool) -> tuple[optuna.Trial, str, dict[str, Any]]:
        """Ask a trial and sample it (define-by-run: the sampler is consulted in each suggest call)."""
        if not fallback:
            trial = self.optuna.ask()
            return (trial, *self.space.sample(trial))
        main, self.optuna.sampler = self.optuna.sampler, self._random
        try:
            trial = self.optuna.ask()
            return (trial, *self.space.sample(trial))
        finally:
            self.optuna.sampler = main

    def _vet(self, trial: optuna.Trial, engine: str, values: dict[str, Any]) -> Suggestion | None:
        """Repair/reject by known constraints, skip predicted failures and duplicates, else launch."""
        sp = self.space.engines[engine]
        try:
            args, notes = sp.apply_constraints(values)
        except Rejected as exc:
            self._skip(trial, engine, values, f"constraint: {exc}")
            return None
        if self.feasibility is not None:
            why = self.feasibility.predict(engine, args)
            if why:
                self._skip(trial, engine, values, why)
                return None
        key = self._key(engine, args)
        twin = self._running.get(key, self._done.get(key))
        if twin is not None:
            self.duplicates += 1
            trial.set_user_attr(A_DUPLICATE, twin)
            self.optuna.tell(trial, state=optuna.trial.TrialState.FAIL)
            return None
        if self.gate is not None:
            ok, reason, prediction = self.gate.judge(engine, args, self.incumbent())
            if not ok:
                self._skip(trial, engine, values, f"sim_gate: {reason}")
                return None
            cfg = self._launch(trial, engine, values, args, notes, baseline=False)
            cfg.notes.append(self.gate.note(cfg.number, reason, prediction))
            return cfg
        return self._launch(trial, engine, values, args, notes, baseline=False)

    def _skip(self, trial: optuna.Trial, engine: str, values: dict[str, Any], reason: str) -> None:
        trial.set_user_attr(A_REJECTED, reason)
        trial.set_user_attr(A_ENGINE, engine)
        self.optuna.tell(trial, state=optuna.trial.TrialState.FAIL)
        self.rejected.append({"engine": engine, "params": dict(values), "reason": reason})
        return None

    def _baseline(self, engine: str) -> Suggestion:
        """The engine's defaults, launched with no searched flag, as an Optuna trial holding the defaults
        the space knows (a knob whose default the engine picks, e.g. SGLang's max_running_requests, is
        left out of that trial's params rather than given a made-up value)."""
        args = dict(self.space.engines[engine].fixed)
        cfg = self._launch(self.baseline_trial(engine), engine, {}, args, [], baseline=True)
        if self.gate is not None:
            _, reason, prediction = self.gate.judge(engine, args, None, baseline=True)
            cfg.notes.append(self.gate.note(cfg.number, reason, prediction))
        return cfg

    def baseline_trial(self, engine: str) -> optuna.Trial:
        sp = self.space.engines[engine]
        known = {k: v for k, v in sp.defaults().items() if sp.active(k, sp.defaults()) and _in_range(sp, {k: v})}
        return self.fixed_trial(engine, known)

    def fixed_trial(self, engine: str, values: dict[str, Any]) -> optuna.Trial:
        """An Optuna trial whose params are exactly `values` (enqueued, then suggested one by one)."""
        self.optuna.enqueue_trial(self._prefixed(engine, values), skip_if_exists=False)
        trial = self.optuna.ask()
        if self.space.joint:
            trial.suggest_categorical("engine", list(self.space.engines))
        sp = self.space.engines[engine]
        replace(sp, params={k: p for k, p in sp.params.items() if k in values}).sample(trial, f"{engine}.")
        return trial

    def _launch(self, trial: optuna.Trial | None, engine: str, params: dict[str, Any], args: dict[str, Any],
                notes: list[str], *, baseline: bool, number: int | None = None) -> Suggestion:
        if number is None and self._free:
            number = self._free.pop(0)
        elif number is None:
            number = self._next
            self._next += 1
        cfg = Suggestion(number=number, engine=engine, params=dict(params), args=args, notes=list(notes),
                         baseline=baseline, incumbent=self.incumbent(),
                         incumbent_capacity=(self.best() or {}).get("capacity"))
        self._configs[number] = cfg
        self._trials[number] = trial
        self._running[self._key(engine, args)] = number
        if trial is not None:
            for k, v in ((A_NUMBER, number), (A_ENGINE, engine), (A_PARAMS, params), (A_ARGS, args),
                         (A_BASELINE, baseline), (A_NOTES, list(notes))):
                trial.set_user_attr(k, json.loads(json.dumps(v, default=str)))
        return cfg

    def bind(self, number: int, trial_id: str) -> None:
        """Record which Tune trial runs this config (the id trials.parquet and MLflow know it by)."""
        trial = self._trials.get(number)
        if trial is not None:
            trial.set_user_attr(A_TRIAL_ID, trial_id)

    def _key(self, engine: str, args: dict[str, Any]) -> tuple[str, str]:
        return config_key(engine, {**self.space.engines[engine].defaults(), **args})

    # ---------------------------------------------------------------- tell

    def tell(self, number: int, result: TrialReport) -> None:
        """Map a trial's final result onto Optuna: ran -> COMPLETE with SLA constraints, else FAIL."""
        cfg = self._configs[number]
        trial = self._trials.pop(number, None)
        key = self._key(cfg.engine, cfg.args)
        self._running.pop(key, None)
        self._done[key] = number
        outcome = result.outcome
        if self.feasibility is not None:
            self.feasibility.observe(cfg.engine, cfg.args, outcome, number, result.reason)
        if self.gate is not None:
            self.gate.observe(number, result, cfg.engine, cfg.args)
        values = self._values(result)
        constraints = self._constraints(result)
        if trial is not None:
            trial.set_user_attr(A_OUTCOME, outcome.value)
            trial.set_user_attr(A_REASON, result.reason[:2000])
            trial.set_user_attr(A_CAPACITY, finite_float(result.capacity))
            if values is None:
                self.optuna.tell(trial, state=optuna.trial.TrialState.FAIL)
            else:
                for name, v in constraints.items():
                    trial.set_constraint(name, v)
                self.optuna.tell(trial, values if self.multi else values[0])
        self.history.append({
            "number": number, "engine": cfg.engine, "params": cfg.params, "args": cfg.args,
            "baseline": cfg.baseline, "outcome": outcome,
            "objective": values[0] if values else None, "latency": values[1] if values and self.multi else
            finite_float(result.latency), "capacity": finite_float(result.capacity),
            "feasible": values is not None and outcome is TrialOutcome.OK
            and all(v <= 0 for v in constraints.values()),
        })

    def _values(self, result: TrialReport) -> list[float] | None:
        """Objective (and latency in multi mode) of a run; None for a failure: never a fake zero."""
        if not result.outcome.ran:
            return None
        obj = finite_float(result.objective)
        if obj is None and result.outcome is TrialOutcome.SLA_VIOLATED:
            obj = finite_float(result.metrics.get(self.study.objective.metric))  # throughput at the lowest load
        if obj is None:
            return None
        if not self.multi:
            return [obj]
        lat = finite_float(result.latency if result.latency is not None
                   else result.metrics.get(self.study.objective.latency_metric))
        return None if lat is None else [obj, lat]

    def _constraints(self, result: TrialReport) -> dict[str, float]:
        """One constraint per SLA term, (value - limit) / limit; missing terms count as violated."""
        given = [finite_float(v) for v in result.violations]
        out: dict[str, float] = {}
        for i, term in enumerate(self.study.sla):
            v = given[i] if i < len(given) else None
            if v is None:
                v = 0.0 if result.outcome is TrialOutcome.OK else 1.0
            out[f"sla.{term.name}"] = v
        return out

    # ---------------------------------------------------------------- read

    def incumbent(self) -> float | None:
        """Best SLA-feasible objective so far (the bar the rung rule compares against)."""
        vals = [h["objective"] for h in self.history if h["feasible"] and h["objective"] is not None]
        return max(vals) if vals else None

    def best(self) -> dict[str, Any] | None:
        rows = [h for h in self.history if h["feasible"]]
        return max(rows, key=lambda h: h["objective"]) if rows else None

    def _grid_queue(self, points: int) -> list[dict[str, Any]]:
        """Grid points of every engine, interleaved, as prefixed Optuna params."""
        per = [[{**({"engine": e} if self.space.joint else {}),
                 **{f"{e}.{k}": _snap(sp.params[k], v) for k, v in g.items()}}
                for g in sp.grid(points)] for e, sp in self.space.engines.items()]
        out: list[dict[str, Any]] = []
        for i in range(max(len(p) for p in per)):
            out += [p[i] for p in per if i < len(p)]
        return out


def secretless(study: Study) -> Study:
    """The study with every engine env value masked and the tracking URI without credentials."""
    from tuner.tracking.credentials import strip_credentials

    engines = {k: v.model_copy(update={"env": {n: "***" for n in v.env}}) for k, v in study.engines.items()}
    tracking = study.tracking.model_copy(update={"mlflow_uri": strip_credentials(study.tracking.mlflow_uri)
                                                 if study.tracking.mlflow_uri else None})
    return study.model_copy(update={"engines": engines, "tracking": tracking})


def make_core(study: Study, space: Space, warm: list[tuple[str, dict[str, Any]]] | None = None,
              storage: optuna.storages.BaseStorage | str | None = None, gate: Any = None) -> SearchCore:
    """The study's search core (algorithm, seed, baseline, constraints from the study); `warm` configs
    (engine, params) are launched first after the baseline (see tuner.search.prescreen); `gate`
    (tuner.search.study_gate.gate_for, built on `secretless(study)`: Tune pickles it) judges each
    candidate on the simulator first."""
    # Tune pickles the searcher to disk (tuner.pkl, searcher state): it holds the study without secrets.
    clean = secretless(study)
    space = Space({k: replace(sp, study=clean if sp.study is not None else None)
                   for k, sp in space.engines.items()})
    core = SearchCore(clean, space, storage=storage, gate=gate)
    if warm:
        core.warm_start(warm)
    return core


def _in_range(sp: Any, values: dict[str, Any]) -> bool:
    for k, v in values.items():
        p = sp.params[k]
        if p.type in ("int", "float") and not (p.low <= v <= p.high):
            return False
        if p.type == "categorical" and v not in (p.choices or []):
            return False
    return True


def _snap(p: Any, v: Any) -> Any:
    """A grid value moved onto the parameter's step, so Optuna records it inside its distribution."""
    if p.type not in ("int", "float") or not p.step or isinstance(v, bool):
        return v
    k = round((v - p.low) / p.step)
    snapped = min(max(p.low + k * p.step, p.low), p.high)
    return int(snapped) if p.type == "int" else round(snapped, 6)


def _tidy(v: Any) -> Any:
    """0.9400000000000001 -> 0.94: stepped floats reach engine flags as their intended values."""
    return round(v, 6) if isinstance(v, float) else v
