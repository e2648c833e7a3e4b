"""Learning which configs cannot run, so the search never pays for the same failure twice.

Three layers, cheapest first:
1. exact memory: a config (engine + launched args) that failed to start or ran out of memory is
   never launched again;
2. monotone rules: an OOM at some values of the memory-increasing parameters predicts OOM for every
   config of the same engine that is at least as large on all of them; two OOMs of the same context
   also predict it for every config at least as large as some mix of the two (memory demands add up,
   so a mix of two failures' settings demands at least the smaller of their two demands); a rule a
   later success contradicts is dropped;
3. two classifiers, trusted only above an adaptive threshold (it tightens when a config they let through
   fails, and loosens when they reject many samples in a row, so they cannot starve the search):
   a random forest of "fails to run" (SCOOT-like) over every observed config, and a memory model, a
   logistic regression of "ran out of memory" against "ran" on the memory sizes and the memory
   context. Why the second: memory demand is a sum (weights + activations + KV share + CUDA graphs), so
   the OOM region is a half-space in those sizes; the forest's axis-aligned splits over every knob read
   it at P ~0.5 after eight OOMs of one search (benchmark dynamic seed 551: memory share 0.93-0.97
   against graph sizes 1550-8424), and the draws kept landing in it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tuner.search.space import EngineSpace
from tuner.spec.levers import DRAFT_SIZES, MEMORY_CONTEXT, unfold
from tuner.trial.outcome import TrialOutcome


@dataclass
class OOMRule:
    """Every config of `engine` with each memory param >= `floor` is predicted to run out of memory; with
    `other` (a pair rule), every config at least as large as some mix l x floor + (1 - l) x other, l in [0, 1]."""

    engine: str
    floor: dict[str, float]
    source: int  # trial number that taught it
    # precision, speculative method and layout change the memory per config: a rule holds only for
    # configs that share them (an OOM with BF16 weights says nothing about FP8 weights or TP 2)
    context: dict[str, str] = field(default_factory=dict)
    other: dict[str, float] | None = None  # the second failure of a pair rule (same knobs)
    other_source: int = -1

    def covers(self, engine: str, full: dict[str, Any]) -> bool:
        return self.matches(engine, _context(full), memory_sizes(full))

    def matches(self, engine: str, context: dict[str, str], size: dict[str, float]) -> bool:
        """`covers` for a config's context and sizes computed once (a config is checked against every rule)."""
        if engine != self.engine or context != self.context:
            return False
        if any(k not in size for k in self.floor):
            return False
        if self.other is None:
            return all(size[k] >= low for k, low in self.floor.items())
        return _above_mix(size, self.floor, self.other)

    def describe(self) -> str:
        if self.other is not None:
            spans = ", ".join(f"{k} {min(v, self.other[k]):g}-{max(v, self.other[k]):g}" for k, v in self.floor.items())
            return (f"predicted OOM: at least a mix of the memory settings that ran out of memory in trials "
                    f"{self.source} and {self.other_source} ({spans})")
        parts = " and ".join(f"{k} >= {v:g}" for k, v in self.floor.items())
        return f"predicted OOM: {parts} (learned from trial {self.source})"


def _above_mix(size: dict[str, float], a: dict[str, float], b: dict[str, float]) -> bool:
    """Is there an l in [0, 1] with size >= l x a + (1 - l) x b on every knob? Each knob bounds l from one side."""
    lo, hi = 0.0, 1.0
    for k, ak in a.items():
        y, bk = size[k], b[k]
        if math.isclose(ak, bk):
            if y < min(ak, bk):
                return False
        elif ak > bk:
            hi = min(hi, (y - bk) / (ak - bk))
        else:
            lo = max(lo, (bk - y) / (bk - ak))
        if lo > hi:
            return False
    return True


def memory_sizes(full: dict[str, Any], knobs: tuple[str, ...] | None = None) -> dict[str, float]:
    """The numeric values that only add memory: the engine's memory knobs (all numeric args when `knobs` is None)
    and the draft length of a speculative config (`speculative_config.num_speculative_tokens`, SGLang's draft
    tokens and steps), which sizes the draft's CUDA graphs and KV."""
    out: dict[str, float] = {}
    for k, v in full.items():
        if isinstance(v, dict):
            out.update({f"{k}.{f}": float(v[f]) for f in DRAFT_SIZES if _number(v.get(f))})
        elif _number(v) and (knobs is None or k in knobs or k in DRAFT_SIZES):
            out[k] = float(v)
    return out


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _context(full: dict[str, Any]) -> dict[str, str]:
    """The memory context of a config: its precision, speculative method (a draft length is a size, not
    context: larger drafts only need more memory) and layout."""
    out = {}
    for k in MEMORY_CONTEXT:
        v = full.get(k)
        if v in (None, "none", "auto", 1):
            continue
        out[k] = str({f: x for f, x in v.items() if f not in DRAFT_SIZES} if isinstance(v, dict) else v)
    return out


@dataclass
class _Obs:
    engine: str
    full: dict[str, Any]
    failed: bool
    oom: bool = False


@dataclass
class FeasibilityModel:
    """Predicts whether a config can run at all, from the outcomes seen so far."""

    spaces: dict[str, EngineSpace]
    use_classifier: bool = True
    memory_model: bool = True  # the logistic OOM model beside the forest (module docstring)
    memory_c: float = 10.0  # its inverse L2 strength on standardised sizes
    seed: int = 0
    threshold: float = 0.85  # classifier P(fail) above which a config is skipped
    min_failures: int = 2  # classifier trains once it has this many failures and as many runs
    rules: list[OOMRule] = field(default_factory=list)
    failed: dict[tuple[str, str], str] = field(default_factory=dict)  # exact config -> reason
    _obs: list[_Obs] = field(default_factory=list)
    _forest: dict[str, Any] = field(default_factory=dict)  # engine -> fitted classifier
    _memory: dict[str, tuple[list[str], Any]] = field(default_factory=dict)  # engine -> (features, fitted OOM model)
    _passed_by_forest: set[tuple[str, str]] = field(default_factory=set)
    _streak: int = 0  # classifier rejections in a row

    def full(self, engine: str, args: dict[str, Any]) -> dict[str, Any]:
        """Launched args completed with the space's defaults, so configs compare on the same keys; a structured
        arg's fields under their param names too (else the classifier reads every speculative config as off)."""
        return {**self.spaces[engine].defaults(), **unfold(args, self.spaces[engine].params)}

    def observe(self, engine: str, args: dict[str, Any], outcome: TrialOutcome, number: int = -1,
                reason: str = "") -> None:
        """Record one trial's outcome; failures that say the config cannot run teach the model."""
        full = self.full(engine, args)
        key = config_key(engine, full)
        failed = outcome.infeasible_config
        if not failed and not outcome.ran:
            return  # crashed / timeout: says little about the config itself
        self._obs.append(_Obs(engine, full, failed, outcome is TrialOutcome.OOM))
        if failed:
            self.failed[key] = f"{outcome.value} in trial {number}{': ' + reason if reason else ''}"
            if key in self._passed_by_forest:  # the classifier let a failure through: be stricter
                self.threshold = max(0.6, self.threshold - 0.05)
            if outcome is TrialOutcome.OOM:
                self._learn_oom(engine, full, number)
        else:
            # a config that ran disproves every rule that covers it
            context, size = _context(full), memory_sizes(full)
            self.rules = [r for r in self.rules if not r.matches(engine, context, size)]
        self._forest.pop(engine, None)  # refit lazily
        self._memory.pop(engine, None)

    def _learn_oom(self, engine: str, full: dict[str, Any], number: int) -> None:
        floor = memory_sizes(full, self.spaces[engine].memory_knobs)
        if not floor:
            return
        ran = [o for o in self._obs if not o.failed]
        rule = OOMRule(engine, floor, number, _context(full))
        if any(rule.covers(o.engine, o.full) for o in ran):
            return  # a larger config already ran: the OOM came from elsewhere
        for r in [r for r in self.rules if r.other is None and r.engine == engine and r.context == rule.context
                  and r.floor.keys() == floor.keys()]:
            pair = OOMRule(engine, r.floor, r.source, rule.context, other=floor, other_source=number)
            if not any(pair.covers(o.engine, o.full) for o in ran):
                self.rules.append(pair)
        self.rules.append(rule)

    def predict(self, engine: str, args: dict[str, Any]) -> str | None:
        """A reason when the config is predicted not to run, else None."""
        full = self.full(engine, args)
        key = config_key(engine, full)
        if key in self.failed:
            return f"same config failed before ({self.failed[key]})"
        context, size = _context(full), memory_sizes(full)
        for rule in self.rules:
            if rule.matches(engine, context, size):
                return rule.describe()
        scores = [(p, what) for p, what in ((self._p_fail(engine, full), "classifier predicts failure"),
                                            (self._p_oom(engine, full), "memory model predicts OOM")) if p is not None]
        p, what = max(scores) if scores else (None, "")
        if p is not None and p >= self.threshold:
            self._streak += 1
            if self._streak >= 20:  # too strict for this space: relax
                self.threshold = min(0.99, self.threshold + 0.05)
                self._streak = 0
            return f"{what} (p={p:.2f} >= {self.threshold:.2f})"
        if p is not None:
            self._passed_by_forest.add(key)
        self._streak = 0
        return None

    def _examples(self, engine: str, failures: bool) -> list[_Obs] | None:
        """The engine's observations a classifier trains on, None until it has `min_failures` of each class:
        every one, failed against ran (the forest), or OOM against ran (`failures`: the memory model)."""
        obs = [o for o in self._obs if o.engine == engine and not (failures and o.failed and not o.oom)]
        n = sum(o.oom if failures else o.failed for o in obs)
        return obs if n >= self.min_failures and len(obs) - n >= self.min_failures else None

    def _p_fail(self, engine: str, full: dict[str, Any]) -> float | None:
        if not self.use_classifier:
            return None
        obs = self._examples(engine, failures=False)
        if obs is None:
            return None
        forest = self._forest.get(engine)
        if forest is None:
            try:
                from sklearn.ensemble import RandomForestClassifier  # lazy: only studies that fail pay for it
            except ImportError:  # rules and exact memory still apply
                self.use_classifier = False
                return None
            forest = RandomForestClassifier(n_estimators=50, min_samples_leaf=1, random_state=self.seed)
            forest.fit(np.array([self._encode(engine, o.full) for o in obs]), [int(o.failed) for o in obs])
            self._forest[engine] = forest
        return float(forest.predict_proba(np.array([self._encode(engine, full)]))[0][1])

    def _p_oom(self, engine: str, full: dict[str, Any]) -> float | None:
        """P(out of memory) from a logistic regression on the memory sizes (linear: demands add up) and the
        memory context's values (each shifts the demand: FP8 weights, a draft model), OOM against ran."""
        if not self.memory_model:
            return None
        obs = self._examples(engine, failures=True)
        if obs is None:
            return None
        fit = self._memory.get(engine)
        if fit is None:
            try:
                from sklearn.linear_model import LogisticRegression
                from sklearn.pipeline import make_pipeline
                from sklearn.preprocessing import StandardScaler
            except ImportError:
                self.memory_model = False
                return None
            rows = [self._memory_row(engine, o.full) for o in obs]
            names = sorted({k for r in rows for k in r})
            model = make_pipeline(StandardScaler(), LogisticRegression(C=self.memory_c))
            model.fit(np.array([[r.get(k, 0.0) for k in names] for r in rows]), [int(o.oom) for o in obs])
            fit = self._memory[engine] = (names, model)
        names, model = fit
        row = self._memory_row(engine, full)
        return float(model.predict_proba(np.array([[row.get(k, 0.0) for k in names]]))[0][1])

    def _memory_row(self, engine: str, full: dict[str, Any]) -> dict[str, float]:
        row = memory_sizes(full, self.spaces[engine].memory_knobs)
        row.update({f"{k}={v}": 1.0 for k, v in _context(full).items()})
        return row

    def _encode(self, engine: str, full: dict[str, Any]) -> list[float]:
        """Numeric features: log for log-scaled ranges, 0/1 for booleans, one-hot for choices."""
        row: list[float] = []
        for name, p in self.spaces[engine].params.items():
            v = full.get(name)
            if p.type in ("int", "float"):
                x = float(v) if isinstance(v, (int, float)) else float(p.low or 0)
                row.append(math.log(max(x, 1e-9)) if p.log else x)
            elif p.type == "bool":
                row.append(1.0 if v else 0.0)
            else:
                row.extend(1.0 if v == c else 0.0 for c in p.choices or [])
        return row

    def describe(self) -> list[str]:
        lines = [r.describe() for r in self.rules]
        lines += [f"{k[0]} {k[1]}: {why}" for k, why in self.failed.items()]
        return lines


def config_key(engine: str, args: dict[str, Any]) -> tuple[str, str]:
    """Identity of a launched config: engine plus its args, order-free."""
    return engine, repr(sorted((k, _norm(v)) for k, v in args.items()))


def _norm(v: Any) -> Any:
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, float):
        return round(v, 6)
    return v
