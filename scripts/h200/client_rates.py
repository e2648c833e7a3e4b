#!/usr/bin/env python3
"""DEVICE: servetune's own load client (tuner.load.target.HttpTarget, what every trial runs) at several Poisson rates
against one running engine; each rate's per-request records go to OUT_DIR/r<RATE>.json.gz.

Why: the simulator gate fits the host on a measured trial's records (`requests.parquet`, written by this client), but
every real-engine probe so far was measured with `vllm bench serve`. Only aiohttp and numpy are needed (the vLLM pack
has both), so it runs beside the recipe's server without servetune's bundle.

    python3 scripts/h200/client_rates.py URL MODEL OUT_DIR "RATES" --np 150 --input 1024 --output 256 [--deadline EPOCH]
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tuner.load.records import Request
from tuner.load.target import HttpTarget


def requests(rate: float, n: int, inp: int, out: int, warmups: int, seed: int) -> list[Request]:
    """`warmups` requests at once (excluded from the records' statistics), then `n` Poisson arrivals at `rate`."""
    arrivals = np.cumsum(np.random.default_rng(seed).exponential(1.0 / rate, n))
    warm = [Request(i, 0.0, inp, out, warmup=True) for i in range(warmups)]
    return warm + [Request(warmups + i, float(arrivals[i]), inp, out) for i in range(n)]


def reset_cache(root: str) -> str:
    try:
        req = urllib.request.Request(root + "/reset_prefix_cache", data=b"", method="POST")
        with urllib.request.urlopen(req, timeout=10) as r:
            return f"reset {r.status}"
    except Exception as exc:  # noqa: BLE001 - reported, not fatal (prompts differ per run anyway)
        return f"reset failed: {exc}"


def spec_counters(root: str) -> dict[str, float]:
    """vLLM's speculative-decoding counters from /metrics (empty without speculation): drafts, draft and accepted
    tokens, summed over label sets, so a rate's acceptance is the difference of two scrapes."""
    try:
        with urllib.request.urlopen(root + "/metrics", timeout=10) as r:
            text = r.read().decode()
    except Exception:  # noqa: BLE001 - no counters is a reading too
        return {}
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("vllm:spec_decode") and " " in line:
            name = line.split("{")[0].split(" ")[0]
            try:
                out[name] = out.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
            except ValueError:
                continue
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("url")
    ap.add_argument("model")
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("rates")
    ap.add_argument("--np", type=int, default=150)
    ap.add_argument("--input", type=int, default=1024)
    ap.add_argument("--output", type=int, default=256)
    ap.add_argument("--warmups", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--deadline", type=float, default=None, help="epoch s: skip a rate that would not end by then")
    a = ap.parse_args()
    a.out_dir.mkdir(parents=True, exist_ok=True)
    target = HttpTarget(a.url, a.model, prompt_mode="token_ids", scrape_metrics=False, timeout_s=600)
    for rate in (float(r) for r in a.rates.split()):
        need = a.np / rate + 40
        if a.deadline is not None and time.time() + need > a.deadline:
            print(f"[client_rates] skip rate {rate:g}: {need:.0f} s left to run, past the deadline", flush=True)
            continue
        root = a.url.rstrip("/").removesuffix("/v1")
        note = reset_cache(root)
        before = spec_counters(root)
        t0 = time.time()
        recs = target.run(requests(rate, a.np, a.input, a.output, a.warmups, a.seed))
        after = spec_counters(root)
        rows = [dataclasses.asdict(r) | {"token_times": list(r.token_times)} for r in recs]
        body = {"rate": rate, "np": a.np, "input": a.input, "output": a.output, "seed": a.seed, "warmups": a.warmups,
                "client": target.last_client, "records": rows,
                "spec_counters": {k: after[k] - before.get(k, 0.0) for k in after}}
        with gzip.open(a.out_dir / f"r{rate:g}.json.gz", "wt") as f:
            json.dump(body, f)
        ok = sum(1 for r in recs if r.ok and not r.warmup)
        spec = {k.removeprefix("vllm:spec_decode_"): round(v) for k, v in body["spec_counters"].items()}
        print(f"[client_rates] rate {rate:g}: {ok}/{a.np} ok in {time.time() - t0:.0f} s ({note}) {spec or ''}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
