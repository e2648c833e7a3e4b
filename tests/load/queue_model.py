"""A small continuous-batching engine for early-stop tests, shaped like vLLM on one H200 with the seeds'
static test (2048 in / 512 out): Poisson arrivals, at most `slots` streams at once (the KV cache or
max_num_seqs), and each engine step gives every running stream one token and lasts
base + per_seq x streams seconds (+ a prefill when it admits). At 8 req/s it settles near 70 streams
at ~17 ms a token, as measured on the device; with 256 slots it serves ~11 req/s at most."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from tuner.load.earlystop import LiveView
from tuner.load.records import RequestRecord


def live_views(rate: float, duration_s: float, *, slots: int = 1024, output_len: int = 512,
               base_s: float = 0.0065, per_seq_s: float = 0.00015, prefill_s: float = 0.02, seed: int = 0,
               period_s: float = 0.25) -> Iterator[LiveView]:
    """What the load client's watcher would see every `period_s` while sending for `duration_s`."""
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1.0 / rate, size=int(rate * duration_s * 2) + 10))
    recs = [RequestRecord(id=i, cls="a", input_len=2048, output_len=output_len, sent_s=float(s))
            for i, s in enumerate(arrivals[arrivals < duration_s])]
    t, nxt, tick = 0.0, 0, period_s
    waiting: list[RequestRecord] = []
    running: list[RequestRecord] = []
    completed: list[RequestRecord] = []
    while tick <= duration_s:
        while nxt < len(recs) and recs[nxt].sent_s <= t:
            waiting.append(recs[nxt])
            nxt += 1
        admit = waiting[:max(0, slots - len(running))]
        del waiting[:len(admit)]
        running += admit
        end = t + base_s + per_seq_s * len(running) + (prefill_s if admit else 0.0)
        while tick < min(end, duration_s + period_s / 2):  # what is seen before this step's tokens land
            inflight = {r.id: r for r in running + waiting}
            sent = sum(1 for r in recs if r.sent_s <= tick)
            yield LiveView(tick, inflight, list(completed), sent, len(recs) + 1)
            tick += period_s
        t = end
        for r in running:
            r.token_times.append(t)
        for r in [r for r in running if len(r.token_times) >= r.output_len]:
            r.first_token_s, r.done_s, r.output_tokens = r.token_times[0], t, r.output_len
            completed.append(r)
            running.remove(r)
        if not running and not waiting and nxt < len(recs):
            t = max(t, recs[nxt].sent_s)
