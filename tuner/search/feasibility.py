"""Learning which configs cannot run, so the search never pays for the same failure twice.

Three layers, cheapest first:
1. exact memory: a config (engine + launched args) that failed to start or ran out of memory is
   never launched again;
2. monotone rules: an OOM at some values of the memory-increasing parameters predicts OOM for every
   config of the same engine that is at least as large on all of them (a rule a later success
   contradicts is dropped);
3. a random-forest classifier of "fails to run" (SCOOT-like) over every observed config, trusted only
   above an adaptive threshold: it tightens when a config it let through fails, and loosens when it
   rejects many samples in a row (so it cannot starve the search).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tuner.search.space import EngineSpace
from tuner.spec.levers import MEMORY_CONTEXT, unfold
from tuner.trial.outcome import TrialOutcome


@dataclass
class OOMRule:
    """Every config of `engine` with each memory param >= `floor` is predicted to run out of memory."""

    engine: str
    floor: dict[str, float]
    source: int  # trial number that taught it
    # precision, speculative decoding and layout change the memory per config: a rule holds only for
    # configs that share them (an OOM with BF16 weights says nothing about FP8 weights or TP 2)
    context: dict[str, str] = field(default_factory=dict)

    def covers(self, engine: str, full: dict[str, Any]) -> bool:
        if engine != self.engine or _context(full) != self.context:
            return False
        for name, low in self.floor.items():
            v = full.get(name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or v < low:
                return False
        return True

    def describe(self) -> str:
        parts = " and ".join(f"{k} >= {v:g}" for k, v in self.floor.items())
        return f"predicted OOM: {parts} (learned from trial {self.source})"


def _context(full: dict[str, Any]) -> dict[str, str]:
    return {k: str(full[k]) for k in MEMORY_CONTEXT if full.get(k) not in (None, "none", "auto", 1)}


@dataclass
class _Obs:
    engine: str
    full: dict[str, Any]
    failed: bool


@dataclass
class FeasibilityModel:
    """Predicts whether a config can run at all, from the outcomes seen so far."""

    spaces: dict[str, EngineSpace]
    use_classifier: bool = True
    seed: int = 0
    threshold: float = 0.85  # classifier P(fail) above which a config is skipped
    min_failures: int = 2  # classifier trains once it has this many failures and as many runs
    rules: list[OOMRule] = field(default_factory=list)
    failed: dict[tuple[str, str], str] = field(default_factory=dict)  # exact config -> reason
    _obs: list[_Obs] = field(default_factory=list)
    _forest: dict[str, Any] = field(default_factory=dict)  # engine -> fitted classifier
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
        self._obs.append(_Obs(engine, full, failed))
        if failed:
            self.failed[key] = f"{outcome.value} in trial {number}{': ' + reason if reason else ''}"
            if key in self._passed_by_forest:  # the classifier let a failure through: be stricter
                self.threshold = max(0.6, self.threshold - 0.05)
            if outcome is TrialOutcome.OOM:
                self._learn_oom(engine, full, number)
        else:
            # a config that ran disproves every rule that covers it
            self.rules = [r for r in self.rules if not r.covers(engine, full)]
        self._forest.pop(engine, None)  # refit lazily

    def _learn_oom(self, engine: str, full: dict[str, Any], number: int) -> None:
        floor = {k: float(full[k]) for k in self.spaces[engine].memory_knobs
                 if isinstance(full.get(k), (int, float)) and not isinstance(full.get(k), bool)}
        if not floor:
            return
        ran = [o for o in self._obs if not o.failed]
        rule = OOMRule(engine, floor, number, _context(full))
        if any(rule.covers(o.engine, o.full) for o in ran):
            return  # a larger config already ran: the OOM came from elsewhere
        self.rules.append(rule)

    def predict(self, engine: str, args: dict[str, Any]) -> str | None:
        """A reason when the config is predicted not to run, else None."""
        full = self.full(engine, args)
        key = config_key(engine, full)
        if key in self.failed:
            return f"same config failed before ({self.failed[key]})"
        for rule in self.rules:
            if rule.covers(engine, full):
                return rule.describe()
        p = self._p_fail(engine, full)
        if p is not None and p >= self.threshold:
            self._streak += 1
            if self._streak >= 20:  # too strict for this space: relax
                self.threshold = min(0.99, self.threshold + 0.05)
                self._streak = 0
            return f"classifier predicts failure (p={p:.2f} >= {self.threshold:.2f})"
        if p is not None:
            self._passed_by_forest.add(key)
        self._streak = 0
        return None

    def _p_fail(self, engine: str, full: dict[str, Any]) -> float | None:
        if not self.use_classifier:
            return None
        obs = [o for o in self._obs if o.engine == engine]
        n_fail = sum(o.failed for o in obs)
        if n_fail < self.min_failures or len(obs) - n_fail < self.min_failures:
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
