"""The search benchmark's landscape: the levers space discretised, screened, and enumerated on the simulator.

Why: a reference optimum taken from a random sample makes random search look near-optimal by
construction. Here every knob gets a few levels (`levels`: powers of two for log-scaled integers, a
handful of evenly spaced values for fractions, every choice of a categorical, the engine default
always among them); a one-at-a-time screen around random base configs measures each knob's largest
effect; knobs whose effect stays under `FLAT` at every base are held at their default, and the rest
are enumerated exhaustively: that maximum is the grid optimum. The benchmark's landscape is "the
config snapped to its nearest levels, flat knobs at default", so a searcher's config is scored by the
same table the optimum comes from, and searches cost no simulation.

Resolution: capacity searches end on a coarse load grid (doubling, then bisection to 5 %), so many
configs tie. `score` interpolates the load where the SLA violation crosses zero between the highest
feasible point and the next infeasible one and scales the objective (output tokens/s at capacity) to
it: ties are real ties, not load-grid artefacts.

Results are cached per workload under benchmarks/results/search/ with a fingerprint of the simulator,
the study and the settings, so reruns are cheap and a changed simulator recomputes.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tuner.search.ask_tell import TrialReport
from tuner.search.feasibility import config_key
from tuner.search.prescreen import simulate
from tuner.search.space import EngineSpace, Rejected
from tuner.spec.study import Study
from tuner.trial.outcome import TrialOutcome

ROOT = Path(__file__).resolve().parents[1]
CACHE_DIR = ROOT / "benchmarks" / "results" / "search"
FLAT = 0.01  # a knob whose largest relative effect at every screened base stays below this is held at default
SCREEN_BASES = 6  # random bases of the screen (the defaults are one more)
SCORE_VERSION = 2  # part of the cache key: bump when `score` changes (2: objective interpolated, not scaled)
# Levels of the wide knobs, chosen so an exhaustive grid (about 430 distinct configs per workload) fits a
# shared 2-core box in the time there was: the benchmark landscape IS this grid (a config is scored at its
# nearest levels), so the grid optimum is exact for the landscape every sampler searches.
LEVELS: dict[str, list[Any]] = {
    "max_num_seqs": [16, 256, 1024],
    "max_num_batched_tokens": [2048, 8192],
    "gpu_memory_utilization": [0.92, 0.97],
    # 512 is what vLLM resolves without the flag at max_num_seqs >= 256 (min(2 x max_num_seqs, 512)): a level a
    # searcher can express. A None level could not be: every sampled value snapped to 2048, which made the
    # static optimum (512) unreachable and handed every sampler the dynamic/mixed optimum's 2048 for free.
    "max_cudagraph_capture_size": [512, 2048],
    "max_num_partial_prefills": [1, 4],
    "long_prefill_token_threshold": [0, 2048],
    # draft tokens per verify step (speculative decoding): powers of two up to DFlash's block limit (15)
    "speculative_config.num_speculative_tokens": [1, 2, 4, 8, 15],
}
# The screen ran once with finer levels (max_num_seqs 16/64/256/1024, batched tokens 1k/2k/8k/32k, memory
# 0.85/0.92/0.97, partial prefills 1/4, prefill cap 0/512/2048): finer levels are stronger evidence of a
# flat knob, so the screen is kept whatever LEVELS say.
SCREEN_LEVELS: dict[str, list[Any]] = {
    "max_num_seqs": [16, 64, 256, 1024],
    "max_num_batched_tokens": [1024, 2048, 8192, 32768],
    "gpu_memory_utilization": [0.85, 0.92, 0.97],
    "max_cudagraph_capture_size": [512, 2048],
    "max_num_partial_prefills": [1, 4],
    "long_prefill_token_threshold": [0, 512, 2048],
}


def levels(p: Any, name: str = "", table: dict[str, list[Any]] | None = None) -> list[Any]:
    """The values a knob takes in the grid (its default included)."""
    table = LEVELS if table is None else table
    if name in table:
        return list(table[name])
    if p.type == "bool":
        vals: list[Any] = [True, False]
    elif p.type == "categorical":
        vals = list(p.choices or [])
    else:
        lo, hi = float(p.low), float(p.high)
        if p.type == "int" and p.log:
            vals, v = [], lo
            while v <= hi:
                vals.append(int(v))
                v *= 2
            if vals[-1] != int(hi):
                vals.append(int(hi))
        elif p.type == "int" and hi - lo <= 6:
            vals = list(range(int(lo), int(hi) + 1))
        else:
            n = 4
            raw = [lo + (hi - lo) * i / (n - 1) for i in range(n)]
            vals = [int(round(x)) if p.type == "int" else round(x, 2) for x in raw]
        if p.default is not None and p.default not in vals:
            vals.append(p.default)
        vals = sorted(set(vals))
    if p.default is None and p.type in ("int", "float"):
        vals = [None, *vals]  # the engine decides (flag absent)
    return vals


def snap(p: Any, v: Any, lv: list[Any]) -> Any:
    """The nearest level (log distance for log-scaled knobs)."""
    if v is None or isinstance(v, (str, bool)):
        return v if v in lv else lv[0]
    nums = [x for x in lv if x is not None]
    dist = (lambda x: abs(math.log(x) - math.log(v))) if p.log and v > 0 else (lambda x: abs(x - v))
    return min(nums, key=dist)


def score(r: TrialReport, metric: str = "output_throughput") -> tuple[float | None, float | None]:
    """(objective at the interpolated SLA capacity, that capacity); (None, None) when nothing met the SLA.

    The objective is interpolated too (between the measured values at the last passing and the first
    failing load), not scaled in proportion to the load: throughput stops growing near saturation, and a
    proportional scale made a config that failed just below a load other configs passed look 60 % better."""
    if r.outcome is not TrialOutcome.OK or r.objective is None or not r.capacity:
        return None, None
    pts = sorted(r.load_points, key=lambda p: p.load)
    good = max((p for p in pts if p.feasible), key=lambda p: p.load, default=None)
    if good is None:
        return r.objective, r.capacity
    above = [p for p in pts if p.load > good.load and not p.feasible]
    if not above:  # never failed within the load range: the capacity is censored at the highest point
        return r.objective, good.load
    bad = above[0]
    v1, v2 = min(good.violation, 0.0), bad.violation
    frac = (-v1) / (v2 - v1) if v2 > v1 else 0.0
    cap = good.load + (bad.load - good.load) * frac
    og, ob = good.summary.get(metric), bad.summary.get(metric)
    if og is None or ob is None:
        return r.objective, cap
    return r.objective + (ob - og) * frac, cap


class Grid:
    """Levels, screen and enumerated table of one workload's landscape (cached on disk)."""

    def __init__(self, name: str, study: Study, sp: EngineSpace, settings: dict[str, Any],
                 log: Callable[[str], None] = print) -> None:
        self.name, self.study, self.sp, self.log = name, study, sp, log
        self.levels = {k: levels(p, k) for k, p in sp.params.items()}
        self.screen_levels = {k: levels(p, k, SCREEN_LEVELS) for k, p in sp.params.items()}
        self.table: dict[str, dict[str, Any]] = {}  # config key -> outcome, objective, capacity, violations
        self.effects: dict[str, float] = {}
        self.sims = 0
        landscape = study.model_dump(mode="json", exclude={"search", "budget", "name"})  # not the sampler's settings
        fp = {"settings": settings, "study": landscape, "sim": _sim_digest(), "score": SCORE_VERSION}
        self.fingerprint = hashlib.sha256(json.dumps(fp, sort_keys=True, default=str).encode()).hexdigest()[:16]
        self.path = CACHE_DIR / f"grid-{name}.json"
        self._load()

    # ------------------------------------------------------------ table
    def _load(self) -> None:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return
        if data.get("fingerprint") == self.fingerprint:  # the table holds configs: valid for any levels
            self.table = data["table"]
            if data.get("screen_of") == self._screen_of():
                self.effects = data.get("effects", {})

    def save(self, done: bool = False) -> None:
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        # a temporary name per process: two benchmark processes on one workload (a cache is shared) must not write
        # one temporary file at once (the loser's replace() then finds it gone); the last complete table wins
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"fingerprint": self.fingerprint, "workload": self.name, "done": done,
                                   "screen_of": self._screen_of(),
                                   "effects": self.effects, "table": self.table}, default=str))
        tmp.replace(self.path)

    def _screen_of(self) -> str:
        return json.dumps([self.screen_levels, FLAT, SCREEN_BASES], default=str)

    def args_of(self, values: dict[str, Any]) -> dict[str, Any] | None:
        vals = {k: v for k, v in values.items() if v is not None and self.sp.active(k, values)}
        try:
            args, _ = self.sp.apply_constraints(vals)
        except Rejected:
            return None
        return args

    def key(self, args: dict[str, Any]) -> str:
        return "|".join(config_key(self.sp.engine, {**self.sp.defaults(), **args}))

    def entry(self, values: dict[str, Any]) -> dict[str, Any] | None:
        """One config given as knob values, simulated once, then from the table (None: rejected)."""
        args = self.args_of(values)
        if args is None:
            return None
        k = self.key(args)
        if k not in self.table:
            self.sims += 1
            r = simulate(self.study, self.sp.flavour, args)
            obj, cap = score(r, self.study.objective.metric)
            self.table[k] = {"o": r.outcome.value, "obj": obj if obj is not None else r.objective, "cap": cap,
                             "v": [None if v is None else round(v, 4) for v in r.violations]}
            if self.sims % 50 == 0:
                self.save()
        return self.table[k]

    def value(self, values: dict[str, Any]) -> tuple[float | None, float | None]:
        """(objective at the interpolated capacity, capacity); None when the config does not meet the SLA."""
        e = self.entry(values)
        if e is None or e["o"] != TrialOutcome.OK.value:
            return None, None
        return e["obj"], e["cap"]

    def report(self, values: dict[str, Any]) -> TrialReport:
        """What a searcher is told of a config (as a trial would report it)."""
        e = self.entry(values)
        if e is None:
            return TrialReport.failed(TrialOutcome.START_FAILED, "rejected by the space's constraints")
        out = TrialOutcome(e["o"])
        return TrialReport(out, objective=e["obj"] if out.ran else None, capacity=e["cap"], violations=e["v"],
                           metrics={})

    # ------------------------------------------------------------ screen, enumerate
    def defaults(self) -> dict[str, Any]:
        return {k: p.default for k, p in self.sp.params.items()}

    def screen(self) -> dict[str, float]:
        """Largest relative effect of each knob over its levels, one at a time, at each base."""
        if self.effects:
            return self.effects
        rng = random.Random(12345)
        bases = [self.defaults()] + [{k: rng.choice(lv) for k, lv in self.screen_levels.items()}
                                     for _ in range(SCREEN_BASES)]
        eff = dict.fromkeys(self.screen_levels, 0.0)
        for base in bases:
            for k, lv in self.screen_levels.items():
                vals = [self.value({**base, k: v})[0] or 0.0 for v in lv]
                top = max(vals)
                if top > 0:
                    eff[k] = max(eff[k], (top - min(vals)) / top)
        self.effects = eff
        self.save()
        return eff

    def flat(self) -> list[str]:
        return [k for k, e in self.screen().items() if e < FLAT]

    def point(self, values: dict[str, Any]) -> dict[str, Any]:
        """A config snapped onto the grid: nearest levels, flat knobs at default."""
        flat = set(self.flat())
        out = {}
        for k, p in self.sp.params.items():
            v = values.get(k, p.default)
            out[k] = p.default if k in flat else snap(p, v, self.levels[k])
        return out

    def enumerate(self) -> tuple[float, dict[str, Any], int]:
        """Every combination of the knobs that matter (flat ones at default): (optimum, its config, size)."""
        flat = set(self.flat())
        names = [k for k in self.levels if k not in flat]
        base = self.defaults()
        best, best_cfg, n, t0 = -1.0, base, 0, time.perf_counter()
        seen: set[str] = set()
        for combo in itertools.product(*[self.levels[k] for k in names]):
            values = {**base, **dict(zip(names, combo, strict=True))}
            args = self.args_of(values)
            if args is None:
                continue
            k = self.key(args)
            if k in seen:
                continue
            seen.add(k)
            n += 1
            obj = self.value(values)[0]
            if obj is not None and obj > best:
                best, best_cfg = obj, values
            if n % 200 == 0:
                self.log(f"[{self.name}] grid {n} configs, {self.sims} simulated, {time.perf_counter() - t0:.0f} s")
        self.save(done=True)
        return best, best_cfg, n

    def size(self) -> int:
        flat = set(self.flat())
        return math.prod(len(v) for k, v in self.levels.items() if k not in flat)


VIRTUAL = ("capacity", "workload", "metrics", "arrivals", "lengths", "profiles", "prompts", "target", "records")


def _sim_digest() -> str:
    """The code of a virtual-time simulation (the simulator but its HTTP face, the load generator's
    virtual path) and the calibration: a change there invalidates the cached tables."""
    h = hashlib.sha256()
    sim = [p for p in sorted((ROOT / "tuner" / "sim").glob("*.py")) if p.stem not in ("server", "live", "prom")]
    for path in sim + [ROOT / "tuner" / "load" / f"{n}.py" for n in VIRTUAL]:
        h.update(path.read_bytes())
    return h.hexdigest()[:16]
