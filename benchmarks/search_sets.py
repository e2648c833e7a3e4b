"""Per-seed reading of `search_efficiency.py --save` pickles (issue 19's bar): hits >= 95 % at 30 per method, seeds
gained and lost against the file's first method, searches under 0.8 of the optimum, and hits per set of 10 seeds.

    .venv/bin/python benchmarks/search_sets.py /tmp/s47/f1440-dynamic.pkl [more.pkl ...]
"""

from __future__ import annotations

import argparse
import pickle
from pathlib import Path

HIT, LOW, BUDGET, SET = 0.95, 0.8, 30, 10


def report(path: Path) -> list[str]:
    results = pickle.loads(path.read_bytes())["results"]
    lines = []
    for workload, methods in results.items():
        base = next(iter(methods.values()))["ratios"][BUDGET]
        for name, res in methods.items():
            ratios = res["ratios"][BUDGET]
            gained = sum(v >= HIT > b for b, v in zip(base, ratios, strict=True))
            lost = sum(b >= HIT > v for b, v in zip(base, ratios, strict=True))
            sets = [sum(v >= HIT for v in ratios[i:i + SET]) for i in range(0, len(ratios), SET)]
            lines.append(f"{workload} {name} hits {sum(v >= HIT for v in ratios)}/{len(ratios)} gained {gained} "
                         f"lost {lost} under{LOW} {sum(v < LOW for v in ratios)} sets {sets}")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("pickles", nargs="+", type=Path)
    for path in ap.parse_args().pickles:
        print("\n".join(report(path)))


if __name__ == "__main__":
    main()
