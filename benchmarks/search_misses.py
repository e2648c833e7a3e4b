"""Where a sampler's misses end on the search benchmark's landscape: a diagnostic that chooses nothing.

For each search that ends below 95 % of the grid optimum, its best grid point and every single-knob neighbour of it
(each other level of one knob) scored from the grid table: which neighbours beat it, whether they reach 95 %, and
whether the search measured them. A miss that is one untried move from >= 95 % was stuck, not out of reach
(docs/search.md, search41).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/search_misses.py --workload dynamic --seeds 0-149 [--method tpe-coord]
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import search_efficiency as se


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workload", default="dynamic", choices=sorted(se.WORKLOADS))
    ap.add_argument("--method", default="tpe-coord")
    ap.add_argument("--seeds", default="0-29", help="first-last")
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--levers", choices=("spec", "fp8", "none"), default="spec")
    ap.add_argument("--requests-per-point", type=int, default=60)
    ap.add_argument("--duration-s", type=float, default=6.0)
    ap.add_argument("--max-points", type=int, default=8)
    a = ap.parse_args()
    study = se.load_study(a.workload, 0, a.trials, a)
    space = se.build_space(study, se.ROOT / "studies")
    sp = space.engines[study.engine_names[0]]
    grid = se.grid_for(a.workload, study, sp, a)
    grid.screen()
    opt, opt_cfg, _ = grid.enumerate()
    oracle = se.Oracle(grid, space)
    names = [k for k in grid.levels if k not in set(grid.flat())]
    first, last = (int(x) for x in a.seeds.split("-"))
    misses, one_move, by_knob = 0, 0, collections.Counter[str]()
    for seed in range(first, last + 1):
        seen: dict[tuple[Any, ...], float] = {}

        def told(core: Any, cfg: Any, report: Any, seen: dict[tuple[Any, ...], float] = seen) -> None:
            point = grid.point(oracle.unfold(cfg.args))
            seen[tuple(point[k] for k in names)] = (grid.value(point)[0] or 0.0) / opt

        se.run_search(oracle, study, se.sampler_for(a.method, study, space, seed), a.trials, seed, on_tell=told)
        best = max(seen, key=lambda c: seen[c])
        if seen[best] >= 0.95:
            continue
        misses += 1
        better = []
        for i, k in enumerate(names):
            for level in grid.levels[k]:
                if level == best[i]:
                    continue
                c = best[:i] + (level,) + best[i + 1:]
                v = (grid.value({**grid.defaults(), **dict(zip(names, c, strict=True))})[0] or 0.0) / opt
                if v > seen[best]:
                    better.append((k.split(".")[-1], level, round(v, 3), "measured" if c in seen else "untried"))
        winners = {k for k, _, v, _ in better if v >= 0.95}
        one_move += bool(winners)
        by_knob.update(winners)
        away = {k.split(".")[-1]: v for k, v in zip(names, best, strict=True) if v != opt_cfg[k]}
        print(f"seed {seed}: {seen[best]:.3f}, differs from the optimum in {away}; better single moves: {better}",
              flush=True)
    print(f"[{a.workload}] {a.method} seeds {a.seeds}: misses={misses} one_move_from_95pct={one_move} "
          + "by_knob=" + ",".join(f"{k}:{n}" for k, n in by_knob.most_common()))


if __name__ == "__main__":
    main()
