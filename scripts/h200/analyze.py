"""The figures docs/benchmarks.md reports for an H200 study, computed from its committed results.

Prints markdown: every trial (args, start cost, capacity, objective, P99s, GPU memory/utilisation),
the tuned/default ratios, the Pareto front, the time spent, and the winner's decode throughput as a
share of the memory-bandwidth roofline.

Roofline (decode is memory-bound): each decode step reads the weights once (Qwen3-8B in bf16 without
the embedding table, which is gathered, not streamed: 7.57e9 params = 15.14 GB) plus the KV cache of
every running sequence (36 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes = 147,456 B per token).
From the winner's per-request records at its capacity point: B = mean number of requests in decode
(sum of decode times / window), C = their mean context (prompt + half the output, weighted by
decode time). A step then moves W + B*C*kv bytes, and at bandwidth BW the roofline decode rate is
B * BW / (W + B*C*kv) tokens/s; the share is measured output tokens/s over that. Prefill chunks
share the steps, so the share is a lower bound on the decode kernels' own bandwidth use.

    python scripts/h200/analyze.py benchmarks/results/h200/h200-static [--copy-tbps 4.3]
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tuner.trial.pareto import pareto_front  # noqa: E402
from tuner.trial.result import TrialResult  # noqa: E402
from tuner.trial.table import read_trials  # noqa: E402

WEIGHT_BYTES = 2 * (36 * (4096 * 4096 * 2 + 4096 * 1024 * 2 + 3 * 4096 * 12288 + 2 * 4096 + 2 * 128)
                    + 4096 + 151936 * 4096)  # layers + final norm + lm_head, bf16
KV_BYTES_PER_TOKEN = 36 * 8 * 128 * 2 * 2
SPEC_TBPS = 4.8


def decode_roofline(records_path: Path, copy_tbps: float | None) -> dict[str, float]:
    import pyarrow.parquet as pq

    rows = [r for r in pq.read_table(records_path).to_pylist()
            if not r["warmup"] and r["error"] is None and r["first_token_s"] is not None and r["done_s"] is not None]
    t0, t1 = min(r["sent_s"] for r in rows), max(r["done_s"] for r in rows)
    window = t1 - t0
    dec = [(r["done_s"] - r["first_token_s"], r["input_len"] + r["output_tokens"] / 2, r["output_tokens"]) for r in rows]
    busy = sum(d for d, _, _ in dec)
    b = busy / window
    ctx = sum(d * c for d, c, _ in dec) / busy
    decode_tokens = sum(max(n - 1, 0) for _, _, n in dec)
    tok_s = decode_tokens / window
    step_bytes = WEIGHT_BYTES + b * ctx * KV_BYTES_PER_TOKEN
    steps_s = tok_s / b
    out = {"requests": len(rows), "window_s": window, "mean_decode_batch": b, "mean_context_tokens": ctx,
           "decode_tokens_per_s": tok_s, "step_bytes_gb": step_bytes / 1e9, "steps_per_s": steps_s,
           "achieved_tbps": step_bytes * steps_s / 1e12,
           "roofline_tokens_per_s_spec": b * SPEC_TBPS * 1e12 / step_bytes}
    out["share_of_spec"] = out["achieved_tbps"] / SPEC_TBPS
    if copy_tbps:
        out["roofline_tokens_per_s_copy"] = b * copy_tbps * 1e12 / step_bytes
        out["share_of_copy"] = out["achieved_tbps"] / copy_tbps
    return out


def gpu_peaks(results: Path) -> dict[int, dict[str, float]]:
    """Peak memory and mean utilisation per trial from the GPU samples in trial_files.tar.gz."""
    out: dict[int, dict[str, float]] = {}
    tar_path = results / "trial_files.tar.gz"
    if not tar_path.exists():
        return out
    with tarfile.open(tar_path) as tar:
        for m in tar.getmembers():
            if m.name.endswith("gpu_samples.json"):
                number = int(Path(m.name).parent.name.split("-")[0])
                f = tar.extractfile(m)
                samples = json.loads(f.read()) if f else []
                if samples:
                    busy = [s["util_pct"] for s in samples if s["util_pct"] > 0]
                    out[number] = {"mem_gib_max": max(s["mem_used_mib"] for s in samples) / 1024,
                                   "util_busy_mean": sum(busy) / len(busy) if busy else 0.0,
                                   "seconds": samples[-1]["t"] - samples[0]["t"]}
    return out


def fmt(v: Any, nd: int = 1) -> str:
    return "-" if v is None else f"{v:,.{nd}f}"


def trial_table(trials: list[TrialResult], gpu: dict[int, dict[str, float]]) -> list[str]:
    lines = ["| # | config | outcome | start s | points | capacity req/s | out tok/s | P99 TTFT ms | P99 TPOT ms "
             "| GPU mem GiB (peak) | wall s |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for t in trials:
        cfg = "defaults (baseline)" if t.baseline else ", ".join(f"{k}={v}" for k, v in t.params.items())
        pts = " ".join(f"{p['load']:g}{'' if p['feasible'] else 'x'}" for p in t.points)
        g = gpu.get(t.number, {})
        lines.append(f"| {t.number} | {cfg} | {t.outcome.value} | {fmt(t.start_s)} | {pts} | {fmt(t.capacity, 2)} | "
                     f"{fmt(t.objective, 0)} | {fmt(t.metrics.get('p99_ttft_ms'), 0)} | "
                     f"{fmt(t.metrics.get('p99_tpot_ms'))} | {fmt(g.get('mem_gib_max'))} | {fmt(t.wall_s, 0)} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", type=Path)
    p.add_argument("--copy-tbps", type=float, default=None, help="copy bandwidth measured by probe.py")
    p.add_argument("--latency", default="p99_tpot_ms")
    args = p.parse_args(argv)
    trials = read_trials(args.results / "trials.parquet")
    gpu = gpu_peaks(args.results)
    print("\n".join(trial_table(trials, gpu)))
    base = next((t for t in trials if t.baseline), None)
    feas = [t for t in trials if t.feasible]
    best = max(feas, key=lambda t: t.objective or 0.0) if feas else None
    print()
    if base and best and base.capacity and base.objective:
        print(f"- winner: trial {best.number} {best.args or 'defaults'}; tuned/default SLA capacity "
              f"{best.capacity / base.capacity:.3f} ({best.capacity:g} vs {base.capacity:g} req/s), "
              f"output tok/s at capacity {best.objective / base.objective:.3f}")
    front = pareto_front([t for t in trials if t.outcome.ran and t.metrics.get("output_throughput") is not None
                          and t.metrics.get(args.latency) is not None], "output_throughput", args.latency)
    print(f"- Pareto front (output tok/s vs {args.latency}): "
          + "; ".join(f"#{t.number} {fmt(t.metrics['output_throughput'], 0)} tok/s @ {fmt(t.metrics[args.latency])} ms"
                      for t in front))
    starts = [t.start_s for t in trials if t.start_s is not None]
    walls = sum(t.wall_s for t in trials)
    print(f"- {len(trials)} trials, {sum(t.outcome.ran for t in trials)} served load; trial wall time {walls:.0f} s; "
          f"server start {min(starts):.0f}-{max(starts):.0f} s (mean {sum(starts) / len(starts):.0f} s, "
          f"{sum(starts) / walls:.0%} of trial time)" if starts else "- no server started")
    for label, t in (("baseline", base), ("winner", best)):
        path = args.results / f"requests_{label}.parquet"
        if label == "winner" and best is base:
            print("- winner = baseline (the defaults): its roofline is the line above")
            continue
        if t is not None and path.exists():
            r = decode_roofline(path, args.copy_tbps)
            print(f"- {label} roofline: " + json.dumps({k: round(v, 3) for k, v in r.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
