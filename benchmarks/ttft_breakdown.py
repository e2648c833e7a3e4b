"""Where an isolated request's first token goes, on a running vLLM server (issue 17: the small shapes' TTFT floor).

The simulator's first token is ~20-25 ms early on Qwen3-1.7B / 4B and late on 14B / 32B (docs/sim.md). A client
TTFT is frontend (HTTP, tokenisation, the hop to the engine core) + queue + prefill step(s) + the way back; vLLM's
own histograms split the engine's part: `vllm:request_queue_time_seconds` (waiting -> scheduled) and
`vllm:request_prefill_time_seconds` (scheduled -> first token), both stamped in the engine core. This script sends
one streaming /v1/completions request at a time (an idle engine: no batching, no queue), distinct random prompts
(no prefix-cache hits), reads /metrics before and after each, and prints per prompt length the medians of:
client TTFT, engine queue, engine prefill, and the rest (client TTFT - queue - prefill: frontend and transport),
plus the mean inter-token gap of the decode that follows (the decode step at batch 1).

Stdlib only, so it runs with the device image's python next to `vllm serve`:

    python3 benchmarks/ttft_breakdown.py --url http://127.0.0.1:8000 --model qwen3-8b-dummy --lens 16,512,2048,4096 \
        --n 12 --json $OUT/ttft_8b.json
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import re
import statistics
import threading
import time
import urllib.parse
from typing import Any

HISTS = ("vllm:request_queue_time_seconds", "vllm:request_prefill_time_seconds", "vllm:time_to_first_token_seconds",
         "vllm:e2e_request_latency_seconds")


def scrape(url: str) -> dict[str, float]:
    """The `_sum` and `_count` of each histogram in HISTS (summed over label sets)."""
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = re.match(r"^([a-z_:]+)(_sum|_count)(\{[^}]*\})? ([0-9.eE+-]+)$", line)
        if m and m.group(1) in HISTS:
            key = m.group(1) + m.group(2)
            out[key] = out.get(key, 0.0) + float(m.group(4))
    return out


def one(url: str, model: str, prompt_len: int, out_len: int, rng: random.Random,
        stamps: list[float] | None = None, ready: threading.Event | None = None, ready_at: int = 0) -> dict[str, Any]:
    """One streaming request; times from just before the request is written. `stamps` (if given) fills as tokens
    arrive; `ready` is set once `ready_at` tokens have."""
    u = urllib.parse.urlparse(url)
    prompt = " ".join(f"w{rng.randrange(1000, 150000)}" for _ in range(prompt_len))
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": out_len, "stream": True, "ignore_eos": True,
                       "temperature": 0.0})
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    conn.connect()
    t0 = time.perf_counter()
    conn.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    stamps = [] if stamps is None else stamps
    buf = b""
    while True:
        chunk = resp.read1(65536)
        if not chunk:
            break
        now = time.perf_counter()
        buf += chunk
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            data = event.strip()[len(b"data: "):] if event.strip().startswith(b"data: ") else b""
            if data and data != b"[DONE]":
                obj = json.loads(data)
                if obj.get("choices") and obj["choices"][0].get("text"):
                    stamps.append(now)
                    if ready is not None and len(stamps) >= ready_at:
                        ready.set()
    conn.close()
    if not stamps:
        raise SystemExit(f"no tokens streamed for a {prompt_len}-token prompt | fix: check the server log")
    gaps = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    return {"ttft_s": stamps[0] - t0, "e2e_s": stamps[-1] - t0, "tokens": len(stamps),
            "mean_gap_s": statistics.mean(gaps) if gaps else float("nan")}


def burst(url: str, model: str, prompt_len: int, out_len: int, rngs: list[random.Random]) -> dict[str, Any]:
    """`one` for len(rngs) requests sent at once; TTFT and gaps are their medians, `ttft_max_s` the last first token."""
    if len(rngs) == 1:
        r = one(url, model, prompt_len, out_len, rngs[0])
        return r | {"ttft_max_s": r["ttft_s"], "burst": 1}
    got: list[dict[str, Any]] = [{} for _ in rngs]

    def run(k: int) -> None:
        got[k] = one(url, model, prompt_len, out_len, rngs[k])

    threads = [threading.Thread(target=run, args=(k,), daemon=True) for k in range(len(rngs))]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    if not all(got):
        raise SystemExit(f"a request of a burst of {len(rngs)} did not finish | fix: check the server log")
    out = {key: statistics.median(g[key] for g in got) for key in ("ttft_s", "e2e_s", "mean_gap_s")}
    return out | {"ttft_max_s": max(g["ttft_s"] for g in got), "tokens": got[0]["tokens"], "burst": len(rngs)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--model", required=True)
    ap.add_argument("--lens", default="16,512,2048,4096", help="prompt lengths in tokens (comma list)")
    ap.add_argument("--n", type=int, default=12, help="requests per length (the first 2 are warm-ups, not counted)")
    ap.add_argument("--out-len", type=int, default=32)
    ap.add_argument("--gap-s", type=float, default=0.3, help="idle time between requests")
    ap.add_argument("--json", default=None, help="write every request's figures here")
    ap.add_argument("--background", type=int, default=0, help="N > 0: each probe is sent while one other request "
                    "decodes (a 16-token prompt, N output tokens, probe after 30 of them); prints that stream's "
                    "largest gap and its stall (sum of gaps beyond its median) from the probe's send to its first "
                    "token + 20 ms: what one new prompt does to a running decode")
    ap.add_argument("--streams", type=int, default=1, help="background requests decoding at once (--background; "
                    "the stall is read on the first)")
    ap.add_argument("--burst", type=int, default=1, help="send this many probes at once (each its own prompt): a "
                    "new request's engine cost that is per request grows the stall with the burst, one per step does not")
    ap.add_argument("--seed", type=int, default=0, help="prompt draw: give each run on one server its own, or its "
                    "prompts hit the prefix cache of an earlier run's (the first token then skips the prefill)")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    rows: list[dict[str, Any]] = []
    for n_in in (int(x) for x in a.lens.split(",")):
        for i in range(a.n):
            streams: list[list[float]] = [[] for _ in range(a.streams if a.background else 0)]
            threads = []
            for k, stamps in enumerate(streams):
                ready = threading.Event()
                bg_rng = random.Random(a.seed * 1_000_000 + i * 1000 + k)
                th = threading.Thread(target=one, args=(a.url, a.model, 16, a.background, bg_rng, stamps, ready, 30),
                                      daemon=True)
                th.start()
                threads.append((th, ready))
            for _, ready in threads:
                ready.wait(30)
            bg = streams[0] if streams else []
            before = scrape(a.url)
            t_send = time.perf_counter()
            r = burst(a.url, a.model, n_in, a.out_len,
                      [rng] if a.burst == 1 else [random.Random(rng.random()) for _ in range(a.burst)])
            time.sleep(0.05)  # the frontend records the finished request's histograms after the last chunk
            after = scrape(a.url)  # before the background requests finish: their histograms stay out
            for th, _ in threads:
                th.join(120)
            if a.background:
                end = t_send + r["ttft_max_s"] + 0.020
                gaps = [b - c for c, b in zip(bg, bg[1:], strict=False)]
                inside = [b - c for c, b in zip(bg, bg[1:], strict=False) if b > t_send and c < end]
                base = statistics.median(gaps) if gaps else 0.0
                r["bg_max_gap_s"] = max(inside) if inside else None
                r["bg_stall_s"] = sum(max(g - base, 0.0) for g in inside) if inside else None
                r["bg_median_gap_s"] = base
            for h in HISTS:
                n = after.get(h + "_count", 0.0) - before.get(h + "_count", 0.0)
                r[h.split(":")[1]] = (after.get(h + "_sum", 0.0) - before.get(h + "_sum", 0.0)) / n if n else None
            r.update(prompt_len=n_in, i=i)
            rows.append(r)
            time.sleep(a.gap_s)
    if a.burst > 1:
        print(f"burst of {a.burst}: client TTFT is the median of each burst's, queue and prefill the means")
    print(f"{'prompt':>7} {'n':>3} {'client TTFT':>12} {'server TTFT':>12} {'queue':>8} {'prefill':>8} "
          f"{'rest':>8} {'decode gap':>11}   (medians, ms)")
    for n_in in sorted({r["prompt_len"] for r in rows}):
        rs = [r for r in rows if r["prompt_len"] == n_in and r["i"] >= 2]

        def med(key: str, rs: list[dict[str, Any]] = rs) -> float:
            vals = [r[key] for r in rs if r.get(key) is not None]
            return statistics.median(vals) * 1e3 if vals else float("nan")

        rest = statistics.median(r["ttft_s"] - (r["request_queue_time_seconds"] or 0)
                                 - (r["request_prefill_time_seconds"] or 0) for r in rs) * 1e3
        print(f"{n_in:>7} {len(rs):>3} {med('ttft_s'):>12.2f} {med('time_to_first_token_seconds'):>12.2f} "
              f"{med('request_queue_time_seconds'):>8.2f} {med('request_prefill_time_seconds'):>8.2f} {rest:>8.2f} "
              f"{med('mean_gap_s'):>11.2f}" + (f"   last first token {med('ttft_max_s'):.2f}" if a.burst > 1 else "")
              + (f"   background: gap {med('bg_median_gap_s'):.2f}, largest "
                                                f"{med('bg_max_gap_s'):.2f}, stall {med('bg_stall_s'):.2f}"
                                                if a.background else ""))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
