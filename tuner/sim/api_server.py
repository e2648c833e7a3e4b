"""vLLM's API server as one CPU that streams every token (issue 17).

On the H200 the API server's single Python thread reaches a full core when Qwen3-1.7B runs ~200 sequences at
24 req/s (benchmarks/results/h200/api-cpu/): ~100 us of its CPU per streamed token. Once it is that busy, tokens
leave later than the engine produced them, in bursts, and later and later while the batch grows: what the small
shapes' TTFT and ITL tails show and an engine-side model cannot. `stream_late` replays the engine's token times
through such a server: each engine step's tokens are one job of (tokens x `stream_tok_s`), served first come
first served; a step's tokens leave at the middle of their job (their order within a step is not modelled).
"""

from __future__ import annotations

from array import array

import numpy as np

from tuner.load.records import RequestRecord


def stream_late(records: list[RequestRecord], tok_s: float) -> None:
    """Move every record's token times (and first/last token) to when the API server sends them, in place."""
    arrs = [np.asarray(r.token_times, dtype=np.float64) for r in records]
    live = [a for a in arrs if len(a)]
    if not live or tok_s <= 0.0:
        return
    uniq, counts = np.unique(np.concatenate(live), return_counts=True)
    cost = counts * tok_s
    done = np.cumsum(cost)
    # Lindley's recursion, vectorised: a job ends at max over earlier starts j of (start_j + the work from j on)
    finish = done + np.maximum.accumulate(uniq - (done - cost))
    out_at = finish - 0.5 * cost
    for r, a in zip(records, arrs, strict=True):
        if not len(a):
            continue
        moved = out_at[np.searchsorted(uniq, a)]
        times = array("d")
        times.frombytes(moved.tobytes())
        r.token_times = times
        r.first_token_s = float(moved[0])
        if r.done_s is not None:
            r.done_s = float(moved[-1])
