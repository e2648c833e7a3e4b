"""vLLM's API server as one CPU that streams every token and takes in every request (issue 17).

On the H200 the API server's single Python thread reaches a full core when Qwen3-1.7B runs ~200 sequences at
24 req/s (benchmarks/results/h200/api-cpu/): ~100 us of its CPU per streamed token. Once it is that busy, tokens
leave later than the engine produced them, in bursts, and later and later while the batch grows: what the small
shapes' TTFT and ITL tails show and an engine-side model cannot. `stream_late` replays the engine's token times
through such a server: each engine step's tokens are one job of (tokens x `stream_tok_s`), served first come
first served; a step's tokens leave at the middle of their job (their order within a step is not modelled).

With `ingress` jobs (send time, service) the same server also reads and tokenises every new request, in the same
first-come order (asyncio's ready queue): a request sent while the server is behind on streaming reaches the
engine only after that backlog. The engine needs those times before it runs and the backlog needs the engine's
tokens, so `SimulatedEngine` solves the two by repeating its run (tuner/sim/engine.py, `api_passes`).
"""

from __future__ import annotations

from array import array

import numpy as np

from tuner.load.records import RequestRecord


def _fifo(arrive: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """Finish times of jobs served first come first served by one server (arrivals sorted), vectorised
    Lindley's recursion: a job ends at the max over earlier starts j of (arrival_j + the work from j on)."""
    done = np.cumsum(cost)
    return done + np.maximum.accumulate(arrive - (done - cost))


def api_queue(records: list[RequestRecord], tok_s: float, sends: np.ndarray | None = None,
              services: np.ndarray | None = None, move: bool = True) -> np.ndarray | None:
    """Serve every step's tokens (and, given `sends`/`services`, one ingress job per record) on one FIFO CPU.

    With `move`, every record's token times (and first/last token) become the times the server sends them, in
    place. Returns the ingress jobs' finish times (None without ingress jobs)."""
    arrs = [np.asarray(r.token_times, dtype=np.float64) for r in records]
    live = [a for a in arrs if len(a)]
    uniq: np.ndarray = np.zeros(0)
    cost: np.ndarray = np.zeros(0)
    if live and tok_s > 0.0:
        uniq, counts = np.unique(np.concatenate(live), return_counts=True)
        cost = counts * tok_s
    n_tok = len(uniq)
    arrive = uniq
    if sends is not None and services is not None:
        arrive = np.concatenate((uniq, sends))
        cost = np.concatenate((cost, services))
    if not len(arrive):
        return None if sends is None else np.asarray(sends, dtype=np.float64).copy()
    order = np.argsort(arrive, kind="stable")  # streaming first at equal times: those tokens were ready first
    fin = np.empty_like(arrive)
    fin[order] = _fifo(arrive[order], cost[order])
    if move and n_tok:
        out_at = fin[:n_tok] - 0.5 * cost[:n_tok]
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
    return None if sends is None else fin[n_tok:]


def stream_late(records: list[RequestRecord], tok_s: float) -> None:
    """Move every record's token times (and first/last token) to when the API server sends them, in place."""
    api_queue(records, tok_s)
