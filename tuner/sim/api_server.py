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

With a per-chunk cost (`chunk_s` > 0, `Calibration.stream_chunk_s`) the server works as vLLM's output handler does:
each time it is free it takes every engine step that has arrived, processes their tokens (`tok_s` each) and then
sends one SSE chunk per request (`chunk_s` each) holding all of that request's new tokens. Idle, that is one chunk
per token, as before; behind, several steps' tokens share one chunk, so the server catches up (its cost per token
falls) and a client sees tokens in bursts: long gaps, then several tokens at once (the ITL tail of a small model).
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
    arrs, uniq, counts = _token_index(records)
    if not tok_s > 0.0:  # ingress jobs only
        uniq, counts = np.zeros(0), np.zeros(0)
    cost: np.ndarray = counts * tok_s
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
        _move(records, arrs, [np.searchsorted(uniq, a) for a in arrs], fin[:n_tok] - 0.5 * cost[:n_tok])
    return None if sends is None else fin[n_tok:]


def _token_index(records: list[RequestRecord]) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """Each record's token times, the distinct step times and their token counts."""
    arrs = [np.asarray(r.token_times, dtype=np.float64) for r in records]
    live = [a for a in arrs if len(a)]
    if not live:
        return arrs, np.zeros(0), np.zeros(0, dtype=np.int64)
    uniq, counts = np.unique(np.concatenate(live), return_counts=True)
    return arrs, uniq, counts


def _rounds(uniq: np.ndarray, counts: np.ndarray, owner: np.ndarray, tok_s: float, chunk_s: float,
            sends: np.ndarray, services: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The batching server's rounds: per step, when its tokens leave; per ingress job, when it ends.

    `owner` is the request of every token, ordered by step. Each round: the ingress jobs that have arrived (in
    send order), then every arrived step's tokens and one chunk per request among them."""
    n_steps, n_in = len(uniq), len(sends)
    out_at = np.empty(n_steps)
    ready = np.empty(n_in)
    bounds = np.concatenate(([0], np.cumsum(counts)))
    free = -np.inf
    i = k = 0
    while i < n_steps or k < n_in:
        nxt = min(uniq[i] if i < n_steps else np.inf, sends[k] if k < n_in else np.inf)
        if free < nxt:
            free = nxt
        while k < n_in and sends[k] <= free:
            free += services[k]
            ready[k] = free
            k += 1
        i2 = int(np.searchsorted(uniq, free, side="right"))
        if i2 <= i:
            continue
        lo, hi = bounds[i], bounds[i2]
        chunks = counts[i] if i2 == i + 1 else len(np.unique(owner[lo:hi]))
        free += (hi - lo) * tok_s
        send = chunks * chunk_s
        out_at[i:i2] = free + 0.5 * send
        free += send
        i = i2
    return out_at, ready


def api_rounds(records: list[RequestRecord], tok_s: float, chunk_s: float, sends: np.ndarray | None = None,
               services: np.ndarray | None = None, move: bool = True) -> np.ndarray | None:
    """`api_queue` with the output handler's batching (one chunk per request per round, `chunk_s` each)."""
    arrs, uniq, counts = _token_index(records)
    step_of = [np.searchsorted(uniq, a) for a in arrs]
    if len(uniq):
        steps = np.concatenate([s for s in step_of if len(s)])
        rid = np.concatenate([np.full(len(s), j) for j, s in enumerate(step_of) if len(s)])
        owner = rid[np.argsort(steps, kind="stable")]
    else:
        owner = np.zeros(0, dtype=np.int64)
    if sends is None or services is None:
        sends_s, serv = np.zeros(0), np.zeros(0)
    else:
        order = np.argsort(sends, kind="stable")
        sends_s, serv = np.asarray(sends, dtype=np.float64)[order], np.asarray(services, dtype=np.float64)[order]
    out_at, ready_sorted = _rounds(uniq, counts, owner, tok_s, chunk_s, sends_s, serv)
    if move and len(uniq):
        _move(records, arrs, step_of, out_at)
    if sends is None:
        return None
    ready = np.empty(len(sends_s))
    ready[order] = ready_sorted
    return ready


def _move(records: list[RequestRecord], arrs: list[np.ndarray], step_of: list[np.ndarray],
          out_at: np.ndarray) -> None:
    for r, a, idx in zip(records, arrs, step_of, strict=True):
        if not len(a):
            continue
        moved = out_at[idx]
        times = array("d")
        times.frombytes(moved.tobytes())
        r.token_times = times
        r.first_token_s = float(moved[0])
        if r.done_s is not None:
            r.done_s = float(moved[-1])


def stream_late(records: list[RequestRecord], tok_s: float) -> None:
    """Move every record's token times (and first/last token) to when the API server sends them, in place."""
    api_queue(records, tok_s)
