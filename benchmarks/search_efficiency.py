"""Search efficiency on the simulated engine in virtual time: grid optimum vs constrained TPE vs random.

For the default study (studies/default.yaml) every config is evaluated exactly as a trial would be
(simulator start checks, then the capacity search under the study's workload and SLA), without Ray:
the same SearchCore drives Optuna by ask/tell, `max_concurrent` configs at a time (so TPE's constant
liar is exercised). Evaluations are cached by config; the workload seed is fixed, so every method
searches the same landscape and only the sampler seed varies.

Methods: tpe (the default searcher), tpe+rung (plus the multi-fidelity rung stop, replayed exactly from
the cached load points), random. Reported: best-found / grid-optimum ratios of the study objective
after 10, 20 and 30 trials per seed, the load points measured (what a GPU pays for), and the SLA
capacity of the tuned config over the engine-default baseline's.

    .venv/bin/python benchmarks/search_efficiency.py [--seeds 5] [--trials 30] [--cache-dir runs/bench]
"""

from __future__ import annotations

import argparse
import hashlib
import pickle
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tuner.search.ask_tell import TrialReport  # noqa: E402
from tuner.search.feasibility import config_key  # noqa: E402
from tuner.search.prescreen import simulate, stopped_result  # noqa: E402
from tuner.search.searcher import SearchCore  # noqa: E402
from tuner.search.space import Rejected, Space, build_space  # noqa: E402
from tuner.spec.load import load_yaml, validate  # noqa: E402
from tuner.spec.study import Study  # noqa: E402
from tuner.trial.fidelity import RungStop, StopTrial  # noqa: E402
from tuner.trial.outcome import TrialOutcome  # noqa: E402

CHECKPOINTS = (10, 20, 30)
LANDSCAPE = {"model", "sim", "workload", "capacity", "sla", "objective", "search_space", "seed"}  # cache key


class Oracle:
    """Evaluates configs on the simulator once each (cache keyed by the launched config)."""

    def __init__(self, study: Study, space: Space) -> None:
        self.study, self.space = study, space
        self.cache: dict[tuple[str, str], TrialReport] = {}
        self.sim_s = 0.0

    def load(self, path: Path | None) -> None:
        """Reuse evaluations of an earlier run of the same study (the file names the study's hash)."""
        if path is not None and path.exists():
            with path.open("rb") as f:
                self.cache.update(pickle.load(f))

    def save(self, path: Path | None) -> None:
        if path is not None:
            tmp = path.with_suffix(".tmp")
            with tmp.open("wb") as f:
                pickle.dump(self.cache, f)
            tmp.replace(path)

    def full(self, engine: str, args: dict[str, Any]) -> TrialReport:
        sp = self.space.engines[engine]
        key = config_key(engine, {**sp.defaults(), **args})
        if key not in self.cache:
            t0 = time.perf_counter()
            self.cache[key] = simulate(self.study, sp.flavour, args)
            self.sim_s += time.perf_counter() - t0
        return self.cache[key]

    def evaluate(self, engine: str, args: dict[str, Any], incumbent: tuple[float | None, float | None],
                 rung: bool) -> tuple[TrialReport, float | None]:
        """The trial's result and its full capacity; with `rung`, the capacity search replayed through the
        rung stop (the capacity is then the unstopped search's)."""
        res = self.full(engine, args)
        points = res.load_points
        if not rung or not points:
            return res, res.capacity
        hook = RungStop(incumbent=incumbent[0], incumbent_load=incumbent[1], sla=self.study.sla,
                        metric=self.study.objective.metric)
        seen: list[Any] = []
        for p in points:
            seen.append(p)
            try:
                hook(p)
            except StopTrial as stop:
                return stopped_result(self.study, stop.reason, seen), res.capacity
        return res, res.capacity


def load_study(path: Path, algorithm: str, seed: int, trials: int, sla: str | None = None) -> Study:
    data = load_yaml(path)
    if sla:
        data["sla"] = [t for t in sla.split(",") if t.strip()]
    data["seed"] = seed
    data["search"] = {**(data.get("search") or {}), "algorithm": algorithm}
    data["budget"] = {**(data.get("budget") or {}), "trials": trials}
    return validate(Study, data, str(path))


def grid_optimum(oracle: Oracle, points: int, knobs: list[str]) -> tuple[float, dict[str, Any], int]:
    """Best objective over a grid of the given knobs (others at engine defaults; repaired, rejects skipped)."""
    best, best_cfg, n = float("-inf"), {}, 0
    for engine, sp in oracle.space.engines.items():
        narrowed = replace(sp, params={k: p for k, p in sp.params.items() if not knobs or k in knobs})
        for values in narrowed.grid(points):
            try:
                args, _ = sp.apply_constraints(values)
            except Rejected:
                continue
            n += 1
            res = oracle.full(engine, args)
            obj = res.objective
            if res.outcome is TrialOutcome.OK and obj is not None and obj > best:
                best, best_cfg = obj, {"engine": engine, **args}
    return best, best_cfg, n


def run_search(oracle: Oracle, study: Study, trials: int, rung: bool) -> dict[str, Any]:
    """One search of `trials` launched configs, `max_concurrent` at a time; best-so-far per trial."""
    core = SearchCore(study, oracle.space)
    best_by_n: list[float | None] = []
    best: dict[str, Any] | None = None
    points = 0
    baseline_cap: float | None = None
    while len(best_by_n) < trials:
        batch = []
        for _ in range(min(study.budget.max_concurrent, trials - len(best_by_n))):
            cfg = core.ask()
            if cfg is None:
                break
            batch.append((cfg, (cfg.incumbent, cfg.incumbent_capacity)))
        if not batch:
            break
        for cfg, incumbent in batch:
            res, capacity_full = oracle.evaluate(cfg.engine, cfg.args, incumbent, rung)
            points += res.points
            core.tell(cfg.number, res)
            if cfg.baseline:
                baseline_cap = res.capacity
            if res.outcome is TrialOutcome.OK and res.objective is not None and \
                    (best is None or res.objective > best["objective"]):
                best = {"objective": res.objective, "engine": cfg.engine, "args": cfg.args, "capacity": capacity_full}
            best_by_n.append(best["objective"] if best else None)
    return {"best_by_n": best_by_n, "best": best, "points": points, "rejected": len(core.rejected),
            "duplicates": core.duplicates, "baseline_capacity": baseline_cap}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--study", type=Path, default=ROOT / "studies" / "default.yaml")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--grid-points", type=int, default=4)
    ap.add_argument("--grid-knobs", default="max_num_seqs,max_num_batched_tokens,gpu_memory_utilization,"
                    "enable_chunked_prefill", help="knobs the reference grid spans ('' = all)")
    ap.add_argument("--methods", default="tpe,tpe+rung,random")
    ap.add_argument("--cache-dir", type=Path, default=None, help="keep simulator evaluations here between runs")
    ap.add_argument("--sla", default=None, help="replace the study's SLA, e.g. 'p99_ttft_ms<=1500,p99_tpot_ms<=40'")
    a = ap.parse_args()

    base = load_study(a.study, "tpe", 0, a.trials, a.sla)
    space = build_space(base, a.study.parent)
    oracle = Oracle(base, space)  # workload seed fixed: one landscape for every method and seed
    cache = None
    if a.cache_dir is not None:
        a.cache_dir.mkdir(parents=True, exist_ok=True)
        h = hashlib.sha256(base.model_dump_json(include=LANDSCAPE).encode())
        for src in sorted([*(ROOT / "tuner" / "sim").glob("*.py"), *(ROOT / "tuner" / "load").glob("*.py")]):
            h.update(src.read_bytes())  # a changed simulator or load path is a new landscape
        digest = h.hexdigest()[:16]
        cache = a.cache_dir / f"search-efficiency-{digest}.pkl"
        oracle.load(cache)
    t0 = time.perf_counter()
    knobs = [k for k in a.grid_knobs.split(",") if k]
    opt, opt_cfg, n_grid = grid_optimum(oracle, a.grid_points, knobs)
    oracle.save(cache)
    print(f"study {base.name}: sla {', '.join(str(t) for t in base.sla)}; objective {base.objective.metric}")
    print(f"grid: {n_grid} configs ({a.grid_points} points per range over {knobs or 'all knobs'}), optimum {opt:.1f} at {opt_cfg} "
          f"[{time.perf_counter() - t0:.0f} s]")
    checkpoints = [c for c in CHECKPOINTS if c <= a.trials] or [a.trials]
    summary: dict[str, dict[str, Any]] = {}
    for method in a.methods.split(","):
        algo, rung = method.split("+")[0], method.endswith("+rung")
        ratios: dict[int, list[float]] = {c: [] for c in checkpoints}
        caps, pts = [], []
        base_cap = None
        for seed in range(a.seeds):
            run = run_search(oracle, load_study(a.study, algo, seed, a.trials, a.sla), a.trials, rung)
            row = []
            for c in checkpoints:
                v = run["best_by_n"][min(c, len(run["best_by_n"])) - 1] if run["best_by_n"] else None
                r = (v or 0.0) / opt
                ratios[c].append(r)
                row.append(f"@{c}={r:.3f}")
            base_cap = run["baseline_capacity"] or base_cap
            caps.append(run["best"]["capacity"] if run["best"] else None)
            pts.append(run["points"])
            print(f"{method:>9} seed {seed}: {' '.join(row)}  points={run['points']} rejected={run['rejected']} "
                  f"duplicates_skipped={run['duplicates']} best={run['best'] and run['best']['args']}")
        med = {c: statistics.median(ratios[c]) for c in checkpoints}
        hits = sum(r >= 0.95 for r in ratios[checkpoints[-1]])
        good_caps = [c for c in caps if c]
        summary[method] = {"median": med, "hits": hits, "points": statistics.mean(pts),
                           "cap": statistics.median(good_caps) if good_caps else None, "base_cap": base_cap}
        mean = " ".join(f"@{c}={statistics.mean(ratios[c]):.3f}" for c in checkpoints)
        print(f"{method:>9} median ratio " + " ".join(f"@{c}={med[c]:.3f}" for c in checkpoints) + f"  mean {mean}"
              + f"  hits>=95% at {checkpoints[-1]}: {hits}/{a.seeds}  mean load points per search: "
              f"{statistics.mean(pts):.0f}")
    oracle.save(cache)
    print(f"simulated {len(oracle.cache)} distinct configs ({oracle.sim_s:.0f} s in this run)")
    last = checkpoints[-1]
    tpe, rnd = summary.get("tpe") or summary.get("tpe+rung"), summary.get("random")
    if tpe is None or rnd is None:
        return
    tuned = tpe["cap"] / tpe["base_cap"] if tpe["cap"] and tpe["base_cap"] else float("nan")
    if "tpe" in summary and "tpe+rung" in summary:
        saved = 1 - summary["tpe+rung"]["points"] / summary["tpe"]["points"]
        print(f"rung stop: {saved:.0%} fewer load points than plain tpe")
    print(f"tpe_hits_95pct={tpe['hits']}/{a.seeds} tpe_median_ratio_at_{last}={tpe['median'][last]:.3f} "
          f"random_median_ratio_at_{last}={rnd['median'][last]:.3f} tuned_vs_default={tuned:.3f}")


if __name__ == "__main__":
    main()
