"""Search efficiency on the levers space against the exhaustive grid optimum (simulated engine, virtual time).

For the seeds' static (studies/static-levers.yaml), dynamic (studies/default.yaml) and mixed (the default
study with the `mixed` profile) workloads, with `allow: [fp8_weights, fp8_kv_cache]`, the landscape is
the grid of benchmarks/search_grid.py: every knob at a few levels, knobs a one-at-a-time screen found
flat (< 1 % effect at every base) held at default, the rest enumerated exhaustively on the simulator
(cached under benchmarks/results/search/); a config a searcher launches is scored at its nearest levels,
so the grid optimum is exact for what is searched and every search is a table lookup. The objective is
output tokens/s at the SLA capacity interpolated between the last passing and first failing load point
(the load grid alone makes many configs tie). The same SearchCore as a study drives each Optuna sampler
by ask/tell, `max_concurrent` at a time (constant liar, constraints, feasibility model, dedup).

Methods: `rf` (random forest + expected improvement, tuner/search/rf_sampler.py; `rf-r3`: a random
config every 3rd guided trial, `rf-r0`: none, `rf-s8`: 8 startup trials, `rf-d`: the `distinct` filter),
`tpe-local` (the study default: TPE with a neighbour move every third guided trial,
tuner/search/local_tpe.py), `random`, `tpe` (independent TPE with constant liar, as make_sampler builds
it), `cmaes` (CMA-ES with margin on the numeric knobs, categoricals independent), `tpe-mv` (multivariate
TPE, group, constant liar), `qmc` (scrambled Sobol), `tpe-mv5` (tpe-mv with 5 startup trials), `nsga2`
(NSGA-II), `tpe-s4` (tpe with 4 startup trials), `local2` (a neighbour move every second guided trial),
`local-s4` (tpe-local with 4 startup trials), `local-mv` (tpe-local on multivariate grouped TPE; suffixes
-e<k> a move every k-th trial, -s<n> startup, -m<n> knobs per move, -c consider_endpoints, -w<x> prior_weight,
-n<x> n_ei_candidates, -b<k> every k-th move a branch move), `tpe-mv-s<n>`; any method with `~lin`: the draft
length searched on a linear scale (as before search42; the landscape unchanged).
`--levers spec` (default): FP8 weights + KV cache and speculative decoding (none/ngram/DFlash, draft tokens);
`--levers fp8`: the earlier FP8-only landscape (432 configs).
Printed per workload: median and mean ratio to the grid optimum after 10/20/30 trials, seeds >= 95 %
at 30, paired per-seed difference to random (mean +- 1 SE) at 10/20/30. Last line: the first method's
worst-workload hits, pooled medians at 20, and the geometric mean over workloads of its median best /
engine defaults.

    .venv/bin/python benchmarks/search_efficiency.py [--seeds 10] [--workloads static,dynamic,mixed]
    .venv/bin/python benchmarks/search_efficiency.py --combine a.pkl,b.pkl --methods rf,tpe-local,random  # pooled
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import math
import pickle
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.search_grid import FLAT, Grid  # noqa: E402
from tuner.search.ask_tell import Suggestion, TrialReport  # noqa: E402
from tuner.search.coord import COORD_STARTUP, CoordTPESampler  # noqa: E402
from tuner.search.coord_polish import PAIR_FLAT, UNTESTED, CoordPolishSampler  # noqa: E402
from tuner.search.local_tpe import LocalTPESampler  # noqa: E402
from tuner.search.rf_sampler import RFSampler  # noqa: E402
from tuner.search.searcher import SearchCore, make_sampler  # noqa: E402
from tuner.search.space import EngineSpace, Space, build_space  # noqa: E402
from tuner.spec.levers import unfold  # noqa: E402
from tuner.spec.load import load_yaml, validate  # noqa: E402
from tuner.spec.study import Study  # noqa: E402

CHECKPOINTS = (10, 20, 30)
WORKLOADS = {"static": ("static-levers.yaml", None), "dynamic": ("default.yaml", None),
             "mixed": ("default.yaml", "mixed")}
ALLOW = ["fp8_weights", "fp8_kv_cache"]
# `--levers spec` (the default): the lever space a user's one-GPU study searches once it allows every class:
# FP8 weights and KV cache, and speculative decoding: ngram (needs no draft) and DFlash, whose Qwen3-8B draft
# the study names (z-lab's, the one the spec-schedule test and the docs' example use). The simulator's own
# acceptance figures (no study figure: tuner/sim/spec.py DEFAULT_ACCEPTANCE). `--levers fp8`: the earlier
# 432-config landscape (FP8 only).
SPEC_ALLOW = [*ALLOW, "speculative_decoding"]
SPEC_METHODS = {"dflash": {"draft_model": "z-lab/Qwen3-8B-DFlash-b16"}}
# A method name ending in `~lin` searches these knobs on a linear scale, as the space did before search42 (the
# draft length is log-scaled since); the landscape (the grid and its snapping) is the space file's either way.
LINEAR_BEFORE = ("speculative_config.num_speculative_tokens",)


class Oracle:
    """The benchmark landscape: a config snapped onto the grid (nearest levels, flat knobs at default),
    scored from the grid's table (tuner.search grid: benchmarks/search_grid.py)."""

    def __init__(self, grid: Grid, space: Space) -> None:
        self.grid, self.grid_space = grid, space

    def score(self, engine: str, args: dict[str, Any]) -> TrialReport:
        return self.grid.report(self.grid.point(self.unfold(args)))

    def value(self, args: dict[str, Any]) -> float | None:
        return self.grid.value(self.grid.point(self.unfold(args)))[0]

    def unfold(self, args: dict[str, Any]) -> dict[str, Any]:
        """Launch args back as knob values: a structured arg (`speculative_config` as one dict) gives its
        fields as `speculative_config.method`, ...; without this every speculative config would be scored
        as speculative decoding off."""
        return unfold(args, self.grid.sp.params)


def load_study(workload: str, seed: int, trials: int, a: argparse.Namespace) -> Study:
    fname, profile = WORKLOADS[workload]
    path = ROOT / "studies" / fname
    data = load_yaml(path)
    data["seed"] = 0  # workload seed fixed: one landscape; sampler seed set apart
    levers = getattr(a, "levers", "fp8")
    spec = levers == "spec"
    data["allow"] = SPEC_ALLOW if spec else [] if levers == "none" else ALLOW
    if spec:
        data["speculative"] = {"methods": SPEC_METHODS}
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


METHODS = ("tpe-coord", "tpe-coord-nf", "tpe-coord-pf", "tpe-coord-ut", "tpe-coord-v1", "tpe-local", "random", "rf", "tpe", "cmaes", "tpe-mv", "qmc", "tpe-mv5", "nsga2", "tpe-s4", "local2", "local-s4", "gp", "gp-tpe")


def grid_for(workload: str, study: Study, sp: EngineSpace, a: argparse.Namespace) -> Grid:
    """The landscape of a workload and `a.levers`, its table cached by name and the capacity settings."""
    name = workload if a.levers == "fp8" else f"{workload}-{a.levers}"
    return Grid(name, study, sp, {"rpp": a.requests_per_point, "dur": a.duration_s, "mp": a.max_points})


def parent_knobs(space: Space) -> list[str]:
    """Optuna names of the knobs that switch others on or off (a `when:` names them)."""
    return sorted({f"{e}.{k}" for e, sp in space.engines.items() for p in sp.params.values() if p.when for k in p.when})


def sampler_for(method: str, study: Study, space: Space, seed: int) -> optuna.samplers.BaseSampler:
    """Optuna's samplers, each seeded; `tpe` is whatever servetune's make_sampler builds for the study."""
    n0 = study.search.n_startup_trials
    if method.startswith("rf-"):  # variants for tuning on seeds 0-9: rf-r3 (random every 3rd), rf-s8 (startup 8)
        kw: dict[str, Any] = {{"r": "random_every", "s": "n_startup_trials"}[p[0]]: int(p[1:])
                              for p in method[3:].split("-") if p != "d"}
        kw["distinct"] = "d" in method[3:].split("-")  # rf-d: tuner.search.rf_sampler's `distinct`
        return RFSampler(seed=seed, space=space, **kw)
    if method in ("tpe-local", "tpe-coord", "tpe", "rf"):  # what servetune's make_sampler builds for `search.algorithm: <method>`
        search = study.search.model_copy(update={"algorithm": method})
        return make_sampler(study.model_copy(update={"seed": seed, "search": search}), space)
    if method in ("tpe-mv", "tpe-mv5"):
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=5 if method == "tpe-mv5" else n0,
                                          multivariate=True, group=True, constant_liar=True)
    if method.startswith("local-mv"):  # multivariate grouped TPE + neighbour moves: local-mv[-e<every>][-s<startup>]
        parts = [p for p in method[8:].split("-") if p]
        kw = {{"e": "local_every", "s": "n_startup_trials", "m": "max_changes"}[p[0]]: int(p[1:])
              for p in parts if p[0] in "esm"}
        opts: dict[str, Any] = {}  # TPE options: c = consider_endpoints, w<x> = prior_weight, n<x> = n_ei_candidates
        for p in parts:
            if p == "c":
                opts["consider_endpoints"] = True
            elif p[0] == "w":
                opts["prior_weight"] = float(p[1:])
            elif p[0] == "n":
                opts["n_ei_candidates"] = int(p[1:])
        branch = [int(p[1:]) for p in parts if p[0] == "b"]  # b<k>: every k-th neighbour move a branch move
        return LocalTPESampler(seed=seed, **{"n_startup_trials": n0, **kw}, multivariate=True, tpe_options=opts,
                               parents=parent_knobs(space), branch_every=branch[-1] if branch else 0)
    if method.startswith("coord"):  # designed start + ranked coordinate moves: coord[-s<startup>][-e<moves per draw>]
        parts = [p for p in method[5:].split("-") if p]
        # the variants tried on seeds 0-9 state every setting (the class defaults are the chosen one's)
        ckw: dict[str, Any] = {"n_startup_trials": n0, "move_share": 2 / 3, "designed": True, "thompson": False,
                               "local": 0.0}
        for p in parts:  # s<n> startup, p<pct> share of guided trials that are moves, r: random (unranked) moves
            if p[0] == "s":
                ckw["n_startup_trials"] = int(p[1:])
            elif p[0] == "p":
                ckw["move_share"] = int(p[1:]) / 100
            elif p == "r":
                ckw["ranked"] = False
            elif p == "n":
                ckw["designed"] = False
            elif p == "t":
                ckw["thompson"] = True
            elif p[0] == "l":  # l<width>: locally weighted model
                ckw["local"] = float(p[1:])
        return CoordTPESampler(seed=seed, **ckw)
    if method.startswith("tpe-coord-c"):  # conditional-move variants tried on seeds 0-9: c<child moves>[-m0: TPE children][-sib]
        c, *rest = method[len("tpe-coord-c"):].split("-")
        return CoordTPESampler(seed=seed, n_startup_trials=min(n0, COORD_STARTUP), conditional=True, child_moves=int(c),
                               children="tpe" if "m0" in rest else "sibling" if "sib" in rest else "model")
    if method == "tpe-coord-nf":  # near failures + tighter draw: chosen on seeds 0-29 (tuner/search/coord_polish.py)
        return CoordPolishSampler.chosen(seed=seed, n_startup_trials=min(n0, COORD_STARTUP))
    if method == "tpe-coord-pf":  # tpe-coord-nf + flat knobs from ties of told trials: chosen on seeds 0-29 (search34)
        return CoordPolishSampler.chosen(seed=seed, n_startup_trials=min(n0, COORD_STARTUP), pair_flat=PAIR_FLAT)
    if method == "tpe-coord-ut":  # tpe-coord-nf + untested moves (matched pairs) get 1 posterior SD: chosen on seeds 0-29 (search35)
        return CoordPolishSampler.chosen(seed=seed, n_startup_trials=min(n0, COORD_STARTUP), untested=UNTESTED)
    if method == "tpe-coord-mh":  # tpe-coord-ut + the space's minor knobs moved last + halves (search39; = ...-x1-mn-hv)
        return CoordPolishSampler.chosen(seed=seed, n_startup_trials=min(n0, COORD_STARTUP), untested=UNTESTED,
                                         minor=space.minor(), halves=True)
    if method.startswith("tpe-coord-p"):  # polish variants (tuner/search/coord_polish.py), tuned on seeds 0-29:
        # p<last trials all moves>[-sa|-sp|-sn: sweep values always / in the polish only / never][-f0: flat by knob]
        # [-n<width>: failure risk from the told trials near the whole config][-c: polish covers every knob first;
        # -cu: counting only moves that changed the objective][-sq: polish moves numerics to sweep points only][-k: c1-m0]
        # [-fz: no flat penalty outside a numeric's flat interval][-i<w>: polish ranks knobs by predicted spread]
        # [-t<x>: Thompson covariance times x][-pf<k>: ties of told trials differing in <= k knobs mark categoricals flat][-l<w>: model width][-s<n>: start trials][-m<pct>: moves' share of guided trials][-u<d>: a categorical value unseen within d knobs predicted >= start]
        # [-x<k>: a move no matched pair tested gets k posterior SDs of its gain (search35)][-xm<d>: pairs differ in <= d][-xc: categorical moves only][-xw: pairs weighted by the model][-xp: the polish tries the untested categorical moves first][-xg: tested moves predicted by their matched pairs]
        # [-mn: the space's minor knobs moved last][-hv: linear numerics also move to half / twice][-wd: and by +- 1/2 range][-fp<x>: fine numeric steps penalised x][-ro<x>: x per earlier move of the knob from a start within -rn<d> knobs][-rl: an OOM move retried with the memory knobs lower][-br: a numeric knob into the gap its profile's parabola rates highest (search43); -brl: only the knob whose move made the incumbent][-hs: the midpoint of the coarse numeric move that made the incumbent (search44)][-hl: and of a coarse move from the incumbent that lost (search45)][-st<n>: after n trials launched without beating the incumbent, its untried lever moves first (search46)][-se<e>: also in the last e trials of the budget; -sm<e>: and each of those is a move (search47)]
        pn, *rest = method[len("tpe-coord-p"):].split("-")
        sweep = {"sa": "always", "sp": "polish", "sn": "none", "sq": "points"}
        start = next((int(r[1:]) for r in rest if r[0] == "s" and r[1:].isdigit()), min(n0, COORD_STARTUP))
        return CoordPolishSampler(seed=seed, n_startup_trials=start, budget=study.budget.trials,
                                  polish=int(pn), sweep=next((sweep[r] for r in rest if r in sweep), "always"),
                                  flat_interval="f0" not in rest,
                                  near_fail=next((float(r[1:]) for r in rest if r[0] == "n"), 0.0),
                                  cover="unflat" if "cu" in rest else "c" in rest, outside=0.0 if "fz" in rest else 0.5,
                                  importance=next((float(r[1:]) for r in rest if r[0] == "i"), 0.0),
                                  draw_scale=next((float(r[1:]) for r in rest if r[0] == "t"), 1.0),
                                  pair_flat=next((int(r[2:]) for r in rest if r.startswith("pf")), 0),
                                  local=next((float(r[1:]) for r in rest if r[0] == "l"), 4.0),
                                  unsupported=next((float(r[1:]) for r in rest if r[0] == "u"), 0.0),
                                  untested=next((float(r[1:]) for r in rest if r[0] == "x" and r[1:2] not in "mcwpg"), 0.0),
                                  untested_most=next((float(r[2:]) for r in rest if r.startswith("xm")), 1.0),
                                  untested_cats="xc" in rest, weigh="model" if "xw" in rest else "flat",
                                  complete="xp" in rest, pair_gain="xg" in rest,
                                  move_share=next((int(r[1:]) / 100 for r in rest if r[0] == "m" and r[1:].isdigit()), 0.5),
                                  minor=space.minor() if "mn" in rest else frozenset(),
                                  halves="hv" in rest, wide="wd" in rest,
                                  fine=next((float(r[2:]) for r in rest if r.startswith("fp")), 0.0),
                                  rotate=next((float(r[2:]) for r in rest if r.startswith("ro")), 0.0),
                                  rotate_near=next((float(r[2:]) for r in rest if r.startswith("rn")), 2.0),
                                  rotate_cats="rc" in rest, relief=space.memory() if "rl" in rest else frozenset(),
                                  bracket="lead" if "brl" in rest else "half-loss" if "hl" in rest else "half" if "hs" in rest
                                  else "br" in rest,
                                  levers=space.levers(),
                                  stall=next((int(r[2:]) for r in rest if r.startswith("st") and r[2:].isdigit()), 0),
                                  stall_end=next((int(r[2:]) for r in rest if r[:2] in ("se", "sm") and r[2:].isdigit()), 0),
                                  end_moves=any(r.startswith("sm") and r[2:].isdigit() for r in rest),
                                  **({"conditional": True, "child_moves": 1, "children": "tpe"} if "k" in rest else {}))
    if method == "tpe-coord-v1":  # tpe-coord without conditional moves (what `tpe-coord` builds; docs/search.md)
        return CoordTPESampler(seed=seed, n_startup_trials=min(n0, COORD_STARTUP), conditional=False)
    if method.startswith("tpe-mv-s"):
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=int(method[8:]), multivariate=True,
                                          group=True, constant_liar=True)
    if method == "local-s4":
        return LocalTPESampler(seed=seed, n_startup_trials=4)
    if method == "local2":
        return LocalTPESampler(seed=seed, n_startup_trials=n0, local_every=2)
    if method == "tpe-s4":
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=4, constant_liar=True)
    if method.startswith("gp"):  # Optuna's GPSampler (needs torch, not a project dependency): SLA terms as constraints;
        # gp-tpe: the knobs outside the GP's joint space (conditional ones: the draft length) from TPE, not random
        indep = optuna.samplers.TPESampler(seed=seed, n_startup_trials=n0, constant_liar=True) if method == "gp-tpe" else None
        return optuna.samplers.GPSampler(seed=seed, n_startup_trials=n0, independent_sampler=indep,
                                         constraints_func=lambda t: list((t.constraints or {}).values()) or [0.0],
                                         warn_independent_sampling=False)
    if method == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if method == "qmc":  # scrambled Sobol over the numeric knobs; categoricals drawn independently
        return optuna.samplers.QMCSampler(qmc_type="sobol", scramble=True, seed=seed,
                                          warn_independent_sampling=False)
    if method == "cmaes":  # CMA-ES (with margin, for integers) on the numeric knobs; categoricals random
        return optuna.samplers.CmaEsSampler(seed=seed, n_startup_trials=n0, with_margin=True,
                                            warn_independent_sampling=False)
    if method == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed, population_size=max(4, min(20, 30 // 3)))
    raise SystemExit(f"unknown method {method!r} | fix: --methods from {', '.join(METHODS)}")


def searched_space(method: str, space: Space) -> Space:
    """The space a method searches: the study's, or with `~lin` the LINEAR_BEFORE knobs on a linear scale."""
    if not method.endswith("~lin"):
        return space
    return Space({e: dataclasses.replace(sp, params={k: p.model_copy(update={"log": False}) if k in LINEAR_BEFORE else p
                                                     for k, p in sp.params.items()})
                  for e, sp in space.engines.items()})


def run_search(oracle: Oracle, study: Study, sampler: optuna.samplers.BaseSampler, trials: int,
               seed: int, on_tell: Callable[[SearchCore, Suggestion, TrialReport], None] | None = None,
               space: Space | None = None) -> dict[str, Any]:
    """One search of `trials` launched configs, `max_concurrent` at a time; best objective after each.
    `on_tell` sees each launched config and its report once told (benchmarks/search_trace.py); `space` is the
    space searched (default: the landscape's)."""
    core = SearchCore(study.model_copy(update={"seed": seed}), space or oracle.grid_space, sampler=sampler)

    best_by_n: list[float | None] = []
    best: float | None = None
    while len(best_by_n) < trials:
        batch = core.ask_batch(min(study.budget.max_concurrent, trials - len(best_by_n)))
        if not batch:
            break
        for cfg in batch:
            report = oracle.score(cfg.engine, cfg.args)
            core.tell(cfg.number, report)
            if on_tell is not None:
                on_tell(core, cfg, report)
            v = oracle.value(cfg.args)
            if v is not None and (best is None or v > best):
                best = v
            best_by_n.append(best)
    return {"best_by_n": best_by_n, "best": best}


def at(run: dict[str, Any], c: int, opt: float) -> float:
    seq = run["best_by_n"]
    v = seq[min(c, len(seq)) - 1] if seq else None
    return (v or 0.0) / opt


def paired(a: list[float], b: list[float]) -> tuple[float, float]:
    """Mean of the per-seed differences and its standard error."""
    d = [x - y for x, y in zip(a, b, strict=True)]
    return statistics.mean(d), (statistics.stdev(d) / math.sqrt(len(d)) if len(d) > 1 else float("nan"))


def workload_report(name: str, runs: dict[str, list[dict[str, Any]]], opt: float, default: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for method, rs in runs.items():
        ratios = {c: [at(r, c, opt) for r in rs] for c in CHECKPOINTS}
        med = {c: statistics.median(v) for c, v in ratios.items()}
        hits = sum(x >= 0.95 for x in ratios[30])
        bests = [r["best"] for r in rs if r["best"]]
        tuned = statistics.median(bests) / default if bests and default else float("nan")
        out[method] = {"ratios": ratios, "hits": hits, "tuned": tuned}
        line = (f"[{name}] {method:>7} median @10/@20/@30 = " + "/".join(f"{med[c]:.3f}" for c in CHECKPOINTS)
                + "  mean = " + "/".join(f"{statistics.mean(ratios[c]):.3f}" for c in CHECKPOINTS)
                + f"  hits>=95%@30 {hits}/{len(rs)}")
        if "random" in runs and method != "random":
            diffs = [paired(ratios[c], [at(r, c, opt) for r in runs["random"]]) for c in CHECKPOINTS]
            line += "  -random @10/@20/@30: " + " ".join(f"{m:+.3f}+-{se:.3f}" for m, se in diffs)
        print(line)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default="static,dynamic,mixed")
    ap.add_argument("--methods", default=",".join(METHODS), help="the first is the one the last line reports")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--seed-offset", type=int, default=0, help="sampler seeds offset..offset+seeds-1 (a held-out "
                    "check of a sampler chosen on seeds 0-9: --seed-offset 10)")
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--requests-per-point", type=int, default=60, help="dynamic/mixed load points (study: 300)")
    ap.add_argument("--duration-s", type=float, default=6.0, help="static load points (study: 30 s)")
    ap.add_argument("--max-points", type=int, default=8, help="load points per capacity search (the studies' 8: fewer censored dynamic/mixed capacities at 16 req/s)")
    ap.add_argument("--levers", choices=("spec", "fp8", "none"), default="spec", help="spec: FP8 + speculative decoding "
                    "(ngram, DFlash), the full one-GPU lever space; fp8: the earlier FP8-only landscape; none: scheduler knobs "
                    "only (what studies/default.yaml searches, no output-changing lever allowed)")
    ap.add_argument("--screen-only", action="store_true", help="screen and size the grids, search nothing")
    ap.add_argument("--save", type=Path, default=None, help="pickle the per-workload results here")
    ap.add_argument("--combine", default=None, help="only print the summary of these --save files (comma list): "
                    "workloads run as parallel processes, or seed sets (--seed-offset) pooled")
    a = ap.parse_args()
    methods = [m for m in a.methods.split(",") if m]
    if any(m.startswith("gp") for m in methods) and importlib.util.find_spec("torch") is None:
        if a.methods != ",".join(METHODS):  # asked for by name: say so before any grid is built
            raise SystemExit("methods gp and gp-tpe (Optuna's GPSampler) need torch, which servetune does not install "
                             "| fix: pip install torch, or leave them out of --methods")
        methods = [m for m in methods if not m.startswith("gp")]
        print("gp and gp-tpe left out: Optuna's GPSampler needs torch (not installed)", flush=True)
    results: dict[str, dict[str, Any]] = {}
    if a.combine:  # files of other workloads are merged; files of the same workload (other seeds) pooled
        for f in a.combine.split(","):
            with open(f, "rb") as fh:
                for wl, res in pickle.load(fh)["results"].items():
                    results[wl] = pool(results[wl], res) if wl in results else res
        for wl, res in results.items():
            combined_report(wl, res, methods)
        return summary(results, methods, len(results[next(iter(results))][methods[0]]["ratios"][30]))
    for wl in [w for w in a.workloads.split(",") if w]:
        if wl not in WORKLOADS:
            raise SystemExit(f"unknown workload {wl!r} | fix: --workloads from {', '.join(WORKLOADS)}")
        t0 = time.perf_counter()
        study = load_study(wl, 0, a.trials, a)
        space = build_space(study, ROOT / "studies")
        sp = space.engines[study.engine_names[0]]
        grid = grid_for(wl, study, sp, a)
        eff = grid.screen()
        flat = grid.flat()
        print(f"[{wl}] screen ({len(grid.table)} configs): largest relative effect per knob: "
              + ", ".join(f"{k}={v:.3f}" for k, v in sorted(eff.items(), key=lambda kv: -kv[1]))
              + f"; flat (< {FLAT:.0%}, held at default): {', '.join(flat) or 'none'}; grid {grid.size()} "
              f"combinations [{time.perf_counter() - t0:.0f} s]", flush=True)
        if a.screen_only:
            continue
        opt, opt_cfg, n = grid.enumerate()
        default = grid.value(grid.defaults())[0] or float("nan")
        print(f"[{wl}] grid optimum {opt:.1f} (objective at interpolated SLA capacity) over {n} distinct configs; "
              f"engine defaults {default:.1f}; optimum: "
              + ", ".join(f"{k}={v}" for k, v in opt_cfg.items() if v != sp.params[k].default), flush=True)
        oracle = Oracle(grid, space)
        runs: dict[str, list[dict[str, Any]]] = {}
        for m in methods:  # each method's line as soon as it is done (a long run on a shared box says something early)
            t1 = time.perf_counter()
            seeds = range(a.seed_offset, a.seed_offset + a.seeds)
            sm = searched_space(m, space)
            runs[m] = [run_search(oracle, study, sampler_for(m.removesuffix("~lin"), study, sm, s), a.trials, s, space=sm)
                       for s in seeds]
            med = statistics.median(at(r, 20, opt) for r in runs[m])
            print(f"[{wl}] {m} done: median @20 {med:.3f} [{time.perf_counter() - t1:.0f} s]", flush=True)
        seen = max((r["best"] or 0) for rs in runs.values() for r in rs)
        print(f"[{wl}] sla {', '.join(str(t) for t in study.sla)}; best any search found {seen:.1f} "
              f"(<= grid optimum: {seen <= opt + 1e-9}); {time.perf_counter() - t0:.0f} s")
        results[wl] = workload_report(wl, runs, opt, default)
        if a.save:
            with a.save.open("wb") as f:
                pickle.dump({"results": results, "args": vars(a)}, f)
    if not a.screen_only:
        summary(results, methods, a.seeds)


def pool(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two seed sets of one workload as one (ratios concatenated, hits added; `tuned` is the mean of the two)."""
    return {m: {"ratios": {c: a[m]["ratios"][c] + b[m]["ratios"][c] for c in CHECKPOINTS},
                "hits": a[m]["hits"] + b[m]["hits"], "tuned": (a[m]["tuned"] + b[m]["tuned"]) / 2}
            for m in a if m in b}


def combined_report(name: str, res: dict[str, Any], methods: list[str]) -> None:
    """Per workload, from saved results: medians, hits and the paired difference to random."""
    for m in [m for m in methods if m in res]:
        r = res[m]["ratios"]
        line = (f"[{name}] {m:>9} median @10/@20/@30 = " + "/".join(f"{statistics.median(r[c]):.3f}" for c in CHECKPOINTS)
                + f"  hits>=95%@30 {res[m]['hits']}/{len(r[30])}")
        if "random" in res and m != "random":
            line += "  -random @10/@20/@30: " + " ".join(
                "{:+.3f}+-{:.3f}".format(*paired(r[c], res["random"]["ratios"][c])) for c in CHECKPOINTS)
        print(line)


def summary(results: dict[str, dict[str, Any]], methods: list[str], seeds: int) -> None:
    chosen = methods[0]
    hits = min(r[chosen]["hits"] for r in results.values())
    pooled = {m: statistics.median([x for r in results.values() for x in r[m]["ratios"][20]])
              for m in methods if all(m in r for r in results.values())}
    tuned = [r[chosen]["tuned"] for r in results.values() if r[chosen]["tuned"] == r[chosen]["tuned"]]
    gm = math.exp(statistics.mean(math.log(t) for t in tuned)) if tuned else float("nan")
    print("pooled median ratio at 20 (workloads x seeds): " + " ".join(f"{m}={v:.3f}" for m, v in pooled.items()))
    if "random" in pooled:
        rand = [x for r in results.values() for x in r["random"]["ratios"][20]]
        print("pooled paired difference to random at 20 (mean +- 1 SE over workloads x seeds): " + " ".join(
            "{}={:+.3f}+-{:.3f}".format(m, *paired([x for r in results.values() for x in r[m]["ratios"][20]], rand))
            for m in pooled if m != "random"))
    print(f"({chosen} is the chosen sampler; hits = worst workload; ratios to the grid optimum)")
    print(f"tpe_hits_95pct={hits}/{seeds} tpe_median_ratio_at_20={pooled[chosen]:.3f} "
          f"random_median_ratio_at_20={pooled.get('random', float('nan')):.3f} tuned_vs_default={gm:.3f}")


if __name__ == "__main__":
    main()
