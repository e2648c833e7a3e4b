"""Where a search's trials go, on benchmarks/search_efficiency.py's landscape (a diagnostic: it chooses nothing).

Per search: each launched config snapped to the grid, its ratio to the grid optimum, its outcome, and the move
that planned it (`tpe-coord`'s single-knob moves); with `--summary`, over the seeds: how many moves and draws
landed on a grid point already measured (a numeric step smaller than the grid's level spacing scores as a
repeat there, not on a real engine), and how many trials ran out of memory. docs/search.md, search40.

    .venv/bin/python benchmarks/search_trace.py --workload dynamic --seed 9            # one search, trial by trial
    .venv/bin/python benchmarks/search_trace.py --workload dynamic --seeds 0-29 --summary
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.search_efficiency import Oracle, grid_for, load_study, run_search, sampler_for  # noqa: E402
from tuner.search.ask_tell import Suggestion, TrialReport  # noqa: E402
from tuner.search.attrs import A_NUMBER  # noqa: E402
from tuner.search.searcher import SearchCore  # noqa: E402
from tuner.search.space import build_space  # noqa: E402


def trace(oracle: Oracle, study: Any, space: Any, method: str, seed: int, trials: int) -> list[dict[str, Any]]:
    """One search as search_efficiency runs it (`run_search`); per launched trial: grid point, value, outcome and
    the move that planned it (the sampler keys moves by Optuna trial, found through its launch number)."""
    sampler = sampler_for(method, study, space, seed)
    moves = getattr(sampler, "moves", {})
    out: list[dict[str, Any]] = []

    def told(core: SearchCore, cfg: Suggestion, report: TrialReport) -> None:
        trial = next(t for t in core.optuna.get_trials(deepcopy=False) if t.user_attrs.get(A_NUMBER) == cfg.number)
        out.append({"point": oracle.grid.point(oracle.unfold(cfg.args)), "value": oracle.value(cfg.args) or 0.0,
                    "outcome": report.outcome.value, "move": moves.get(trial.number)})

    run_search(oracle, study, sampler, trials, seed, on_tell=told)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="dynamic", choices=("static", "dynamic", "mixed"))
    ap.add_argument("--method", default="tpe-coord", help="a benchmarks/search_efficiency.py method")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seeds", default=None, help="a range a-b (inclusive) instead of --seed")
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--summary", action="store_true", help="only the counts over the seeds")
    a = ap.parse_args()
    opts = argparse.Namespace(levers="spec", requests_per_point=60, duration_s=6.0, max_points=8)
    study = load_study(a.workload, 0, a.trials, opts)
    space = build_space(study, ROOT / "studies")
    sp = space.engines[study.engine_names[0]]
    grid = grid_for(a.workload, study, sp, opts)
    grid.screen()
    opt = grid.enumerate()[0]
    oracle = Oracle(grid, space)
    lo, hi = (int(x) for x in a.seeds.split("-")) if a.seeds else (a.seed, a.seed)
    counts: Counter[str] = Counter()
    knobs: Counter[str] = Counter()  # the knob of each move that landed on a measured grid point
    for seed in range(lo, hi + 1):
        seen: set[str] = set()
        best = 0.0
        rows = trace(oracle, study, space, a.method, seed, a.trials)
        for i, r in enumerate(rows, 1):
            key = repr(sorted(r["point"].items(), key=str))
            kind = "move" if r["move"] else "draw"
            counts[kind] += 1
            if key in seen:
                counts[f"{kind} on a measured grid point"] += 1
                if r["move"]:
                    knobs[r["move"][0].split(".")[-1]] += 1
            counts["out of memory"] += r["outcome"] == "oom"
            seen.add(key)
            best = max(best, r["value"])
            if not a.summary:
                move = f" move {r['move'][0].split('.', 1)[-1]} -> {r['move'][1]}" if r["move"] else ""
                print(f"{i:2d} {r['value'] / opt:.3f} best {best / opt:.3f} {r['outcome']:<12}{move}\n   "
                      + " ".join(f"{k.split('.')[-1]}={v}" for k, v in r["point"].items() if k not in grid.flat()))
        counts["searches"] += 1
        counts["hits >= 95 %"] += best >= 0.95 * opt
    print(f"[{a.workload}] {a.method} seeds {lo}-{hi}: " + ", ".join(f"{k}={v}" for k, v in sorted(counts.items())))
    print("moves on a measured grid point by knob: " + ", ".join(f"{k}={v}" for k, v in knobs.most_common()))


if __name__ == "__main__":
    main()
