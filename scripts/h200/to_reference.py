"""Every load point the H200 study measured, as reference points for the simulator's calibration.

Format as benchmarks/reference/h200-vllm-0.26.0 (tuner.sim.reference): one JSON file per point with
the figures `vllm bench serve` names (output_throughput, p50/p99 TTFT and TPOT in ms), plus
points.json, which lists each point's engine args, Poisson rate, request count and lengths: what
a `RefPoint` needs. Load points differ from `vllm bench serve` runs in two ways, both said in the
set's README: arrivals come from servetune's generator (Poisson, 18 s per point, 8 warm-ups sent
first), and the prefix cache was reset before each point.

    python scripts/h200/to_reference.py benchmarks/results/h200/h200-static benchmarks/reference/h200-servetune
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tuner.trial.table import read_trials  # noqa: E402

KEYS = ("output_throughput", "request_throughput", "p50_ttft_ms", "p90_ttft_ms", "p99_ttft_ms", "p50_tpot_ms",
        "p90_tpot_ms", "p99_tpot_ms", "p50_itl_ms", "p99_itl_ms", "p50_e2el_ms", "p99_e2el_ms", "completed", "failed",
        "duration")  # vLLM's names, as our summaries now use them


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", type=Path)
    p.add_argument("dest", type=Path)
    p.add_argument("--input-len", type=int, default=2048)
    p.add_argument("--output-len", type=int, default=512)
    args = p.parse_args(argv)
    args.dest.mkdir(parents=True, exist_ok=True)
    index = []
    for t in read_trials(args.results / "trials.parquet"):
        name_cfg = "default" if t.baseline else "_".join(f"{k}{v}" for k, v in sorted(t.params.items()))
        for pt in t.points:
            if pt.get("stopped_early"):
                continue  # cancelled requests are missing: its percentiles are not comparable
            name = f"t{t.number}_{name_cfg}_r{pt['load']:g}"
            data = {k: pt.get(k) for k in KEYS}
            data.update({"request_rate": pt["load"], "engine_args": t.args, "trial": t.number,
                         "start_s": t.start_s, "feasible": pt.get("feasible")})
            (args.dest / f"bench_{name}.json").write_text(json.dumps(data, indent=1, default=str) + "\n")
            index.append({"name": name, "file": f"bench_{name}.json", "args": t.args, "rate": pt["load"],
                          "prompts": int(pt.get("completed", 0) + pt.get("failed", 0)),
                          "input_len": args.input_len, "output_len": args.output_len})
    (args.dest / "points.json").write_text(json.dumps(index, indent=1, default=str) + "\n")
    print(f"{len(index)} points -> {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
