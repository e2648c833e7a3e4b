"""Search efficiency on the levers space, simulated engine in virtual time: constrained TPE vs random.

For the seeds' static (studies/static-levers.yaml), dynamic (studies/default.yaml) and mixed (the default
study with the `mixed` profile) workloads, with `allow: [fp8_weights, fp8_kv_cache]` (the space of issue
15: scheduler knobs, FP8 weights and KV cache, prefill caps, CUDA-graph size, stream interval), every
config is scored as a trial would be (simulator start checks, then the capacity search), without Ray: the
same SearchCore drives Optuna by ask/tell, `max_concurrent` configs at a time (so the constant liar is
exercised). Scores are cached per config; the workload seed is fixed, so every method and sampler seed
searches the same landscape.

The space (15 knobs, 4 of them continuous or wide integers) has no enumerable grid, so the reference
optimum is the best objective over a large random sample (`--ref-sample`) and every config any method
launched; ratios are best-found / that reference. Load points are shortened (`--requests-per-point`,
`--duration-s`) so the 3 x 10 x 3 x 30 searches fit a shared 2-core box; that changes the landscape a
little (shorter points queue less) but it is one landscape for every method.

Methods: `tpe` (the study default: SearchCore's make_sampler), `tpe-mv` (multivariate TPE with `group`
for the conditional knobs, constant liar), `random`. Printed per workload: the median and mean ratio
after 10/20/30 trials, seeds >= 95 % at 30, the paired per-seed difference to random at 20 (mean +- 2
standard errors: "beats random by more than seed noise" means the interval excludes 0), and the SLA
capacity of the best config over the engine-default baseline's. Last line: the worst workload's hits,
medians at 20 over all workloads' seeds, and the geometric mean of tuned_vs_default over workloads.

    .venv/bin/python benchmarks/search_efficiency.py [--seeds 10] [--workloads static,dynamic,mixed]
"""

from __future__ import annotations

import argparse
import math
import pickle
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import optuna

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tuner.search.ask_tell import TrialReport  # noqa: E402
from tuner.search.feasibility import config_key  # noqa: E402
from tuner.search.prescreen import simulate  # noqa: E402
from tuner.search.searcher import SearchCore, make_sampler  # noqa: E402
from tuner.search.space import Space, build_space  # noqa: E402
from tuner.spec.load import load_yaml, validate  # noqa: E402
from tuner.spec.study import Study  # noqa: E402
from tuner.trial.outcome import TrialOutcome  # noqa: E402

CHECKPOINTS = (10, 20, 30)
WORKLOADS = {"static": ("static-levers.yaml", None), "dynamic": ("default.yaml", None),
             "mixed": ("default.yaml", "mixed")}
ALLOW = ["fp8_weights", "fp8_kv_cache"]


class Oracle:
    """Scores configs on the simulator once each (cache keyed by the launched config with defaults)."""

    def __init__(self, study: Study, space: Space) -> None:
        self.study, self.space = study, space
        self.cache: dict[tuple[str, str], TrialReport] = {}
        self.sim_s = 0.0

    def score(self, engine: str, args: dict[str, Any]) -> TrialReport:
        sp = self.space.engines[engine]
        key = config_key(engine, {**sp.defaults(), **args})
        if key not in self.cache:
            t0 = time.perf_counter()
            res = simulate(self.study, sp.flavour, args)
            self.cache[key] = TrialReport(res.outcome, objective=res.objective, latency=res.latency,
                                          capacity=res.capacity, violations=res.violations, reason=res.reason,
                                          metrics=res.metrics, points=res.points)  # load points dropped
            self.sim_s += time.perf_counter() - t0
        return self.cache[key]

    def best(self) -> float:
        return max((r.objective for r in self.cache.values()
                    if r.outcome is TrialOutcome.OK and r.objective is not None), default=float("nan"))


def load_study(workload: str, seed: int, trials: int, a: argparse.Namespace) -> Study:
    fname, profile = WORKLOADS[workload]
    path = ROOT / "studies" / fname
    data = load_yaml(path)
    data["seed"], data["allow"] = 0, ALLOW  # workload seed fixed: one landscape; sampler seed set apart
    if profile:
        data["workload"] = {**data["workload"], "profile": profile}
        data["name"] = f"{data['name']}-{profile}"
    cap = dict(data["capacity"])
    if "requests_per_point" in cap:
        cap["requests_per_point"] = a.requests_per_point
    if "duration_s" in cap:
        cap["duration_s"] = a.duration_s
    if a.max_points:
        cap["max_points"] = a.max_points
    data["capacity"] = cap
    data["budget"] = {**(data.get("budget") or {}), "trials": trials}
    return validate(Study, data, str(path))


def sampler_for(method: str, study: Study, space: Space, seed: int) -> optuna.samplers.BaseSampler:
    if method == "tpe":
        return make_sampler(study.model_copy(update={"seed": seed}), space)
    if method == "tpe-mv":
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=study.search.n_startup_trials,
                                          multivariate=True, group=True, constant_liar=True)
    if method == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    raise SystemExit(f"unknown method {method!r} | fix: --methods from tpe, tpe-mv, random")


def run_search(oracle: Oracle, study: Study, sampler: optuna.samplers.BaseSampler, trials: int,
               seed: int) -> dict[str, Any]:
    """One search of `trials` launched configs, `max_concurrent` at a time; best objective after each."""
    core = SearchCore(study.model_copy(update={"seed": seed}), oracle.space, sampler=sampler)
    best_by_n: list[float | None] = []
    best: dict[str, Any] | None = None
    baseline_cap: float | None = None
    while len(best_by_n) < trials:
        batch = core.ask_batch(min(study.budget.max_concurrent, trials - len(best_by_n)))
        if not batch:
            break
        for cfg in batch:
            res = oracle.score(cfg.engine, cfg.args)
            core.tell(cfg.number, res)
            if cfg.baseline:
                baseline_cap = res.capacity
            if res.outcome is TrialOutcome.OK and res.objective is not None and \
                    (best is None or res.objective > best["objective"]):
                best = {"objective": res.objective, "args": cfg.args, "capacity": res.capacity}
            best_by_n.append(best["objective"] if best else None)
    return {"best_by_n": best_by_n, "best": best, "baseline_capacity": baseline_cap,
            "rejected": len(core.rejected), "duplicates": core.duplicates}


def reference_sample(oracle: Oracle, study: Study, n: int) -> None:
    """Score `n` random configs of the space (seed 10_000: apart from every search seed)."""
    core = SearchCore(study.model_copy(update={"seed": 10_000}), oracle.space,
                      sampler=optuna.samplers.RandomSampler(seed=10_000))
    for _ in range(n):
        cfg = core.ask()
        if cfg is None:
            break
        core.tell(cfg.number, oracle.score(cfg.engine, cfg.args))


def at(run: dict[str, Any], c: int, opt: float) -> float:
    seq = run["best_by_n"]
    v = seq[min(c, len(seq)) - 1] if seq else None
    return (v or 0.0) / opt


def workload_report(name: str, runs: dict[str, list[dict[str, Any]]], opt: float, n_ref: int,
                    n_cache: int) -> dict[str, Any]:
    print(f"[{name}] reference optimum {opt:.1f} (best of {n_ref} random configs and every searched config; "
          f"{n_cache} distinct configs scored)")
    out: dict[str, Any] = {}
    for method, rs in runs.items():
        ratios = {c: [at(r, c, opt) for r in rs] for c in CHECKPOINTS}
        med = {c: statistics.median(v) for c, v in ratios.items()}
        hits = sum(x >= 0.95 for x in ratios[30])
        caps = [r["best"]["capacity"] for r in rs if r["best"] and r["best"]["capacity"]]
        base = next((r["baseline_capacity"] for r in rs if r["baseline_capacity"]), None)
        tuned = statistics.median(caps) / base if caps and base else float("nan")
        out[method] = {"ratios": ratios, "hits": hits, "tuned": tuned}
        print(f"[{name}] {method:>6} median @10/@20/@30 = " + "/".join(f"{med[c]:.3f}" for c in CHECKPOINTS)
              + "  mean = " + "/".join(f"{statistics.mean(ratios[c]):.3f}" for c in CHECKPOINTS)
              + f"  hits>=95% at 30: {hits}/{len(rs)}  tuned/default capacity {tuned:.3f}"
              + f"  @20 per seed: {' '.join(f'{x:.2f}' for x in ratios[20])}")
    if "random" in out:
        for method in out:
            if method == "random":
                continue
            d = [x - y for x, y in zip(out[method]["ratios"][20], out["random"]["ratios"][20], strict=True)]
            se = statistics.stdev(d) / math.sqrt(len(d)) if len(d) > 1 else float("nan")
            print(f"[{name}] {method} - random at 20, paired over seeds: {statistics.mean(d):+.3f} "
                  f"+- {2 * se:.3f} (2 SE)")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default="static,dynamic,mixed")
    ap.add_argument("--methods", default="tpe,tpe-mv,random")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--ref-sample", type=int, default=150, help="random configs scored for the reference optimum")
    ap.add_argument("--requests-per-point", type=int, default=100, help="dynamic/mixed load points (study: 300)")
    ap.add_argument("--duration-s", type=float, default=10.0, help="static load points (study: 30 s)")
    ap.add_argument("--max-points", type=int, default=None, help="load points per capacity search (study: 8)")
    ap.add_argument("--save", type=Path, default=None, help="pickle the per-workload results here")
    ap.add_argument("--combine", default=None, help="only print the summary of these --save files (comma list): "
                    "workloads run as parallel processes")
    a = ap.parse_args()
    methods = [m for m in a.methods.split(",") if m]
    results: dict[str, dict[str, Any]] = {}
    if a.combine:
        for f in a.combine.split(","):
            with open(f, "rb") as fh:
                results.update(pickle.load(fh)["results"])
        return summary(results, methods, a.seeds)
    for wl in [w for w in a.workloads.split(",") if w]:
        if wl not in WORKLOADS:
            raise SystemExit(f"unknown workload {wl!r} | fix: --workloads from {', '.join(WORKLOADS)}")
        t0 = time.perf_counter()
        study = load_study(wl, 0, a.trials, a)
        space = build_space(study, ROOT / "studies")
        oracle = Oracle(study, space)
        reference_sample(oracle, study, a.ref_sample)
        runs = {m: [run_search(oracle, study, sampler_for(m, study, space, s), a.trials, s) for s in range(a.seeds)]
                for m in methods}
        print(f"[{wl}] sla {', '.join(str(t) for t in study.sla)}; objective {study.objective.metric}; "
              f"{time.perf_counter() - t0:.0f} s")
        results[wl] = workload_report(wl, runs, oracle.best(), a.ref_sample, len(oracle.cache))
        if a.save:
            with a.save.open("wb") as f:
                pickle.dump({"results": results, "args": vars(a)}, f)
    summary(results, methods, a.seeds)


def summary(results: dict[str, dict[str, Any]], methods: list[str], seeds: int) -> None:
    chosen = methods[0]
    hits = min(r[chosen]["hits"] for r in results.values())
    pooled = {m: statistics.median([x for r in results.values() for x in r[m]["ratios"][20]])
              for m in methods if all(m in r for r in results.values())}
    tuned = [r[chosen]["tuned"] for r in results.values() if r[chosen]["tuned"] == r[chosen]["tuned"]]
    gm = math.exp(statistics.mean(math.log(t) for t in tuned)) if tuned else float("nan")
    print(f"({chosen} is the chosen sampler; hits = worst workload, medians pooled over workloads x seeds)")
    print(f"tpe_hits_95pct={hits}/{seeds} tpe_median_ratio_at_20={pooled[chosen]:.3f} "
          f"random_median_ratio_at_20={pooled.get('random', float('nan')):.3f} tuned_vs_default={gm:.3f}")


if __name__ == "__main__":
    main()
