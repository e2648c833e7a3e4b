"""Several client processes for one run, when one process cannot read every stream in time.

One event loop reads every stream in turn; past some tokens/s (benchmarks/client_capacity.py
measures where) its read lag grows, and with it every timestamp's error. `run_split` deals the
requests round-robin (in arrival order) to N processes, each with its own loop, connections and
ruler, and 1/N of a closed loop's concurrency. Each process runs its share of the warm-up, then all
wait at a barrier and start their measured window at one shared `perf_counter()` instant
(CLOCK_MONOTONIC is one clock for every process on the machine), so their arrival schedules and
timestamps line up; records come back on the parent's clock. Only the first process scrapes
`/metrics`. The run's client keys merge conservatively (the worst process's lag figures, summed
counts). Early-stop checks need every stream in one place, so a run with one stays in one process.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import TYPE_CHECKING, Any

from tuner.load.records import Request, RequestRecord

if TYPE_CHECKING:
    from tuner.load.target import HttpTarget

START_DELAY_S = 0.05  # from the last process reaching the barrier to the window's start
BARRIER_TIMEOUT_S = 600.0  # a process that never gets there (crashed) breaks the barrier for the others
_SUMMED = ("client_lag_samples", "total_client_gc_ms", "client_connects")
_LEAST = ("client_rx_kernel",)  # a share where less is worse


def run_split(target: HttpTarget, requests: Sequence[Request], concurrency: int | None,
              send_until_s: float | None) -> list[RequestRecord]:
    n = target.processes
    order = sorted(requests, key=lambda r: (r.warmup is False, r.arrival_s, r.id))
    parts = [order[i::n] for i in range(n)]
    conc = [None if concurrency is None else concurrency // n + (1 if i < concurrency % n else 0) for i in range(n)]
    ctx = mp.get_context("spawn")  # no fork: the parent may hold threads (Ray, NVML)
    with ctx.Manager() as manager:
        barrier = manager.Barrier(n, timeout=BARRIER_TIMEOUT_S)
        start = manager.Value("d", 0.0)
        lock = manager.Lock()
        with ProcessPoolExecutor(n, mp_context=ctx) as pool:
            # the class travels by reference (no import of tuner.load.target here: it imports this module)
            futures = [pool.submit(_worker, type(target), target.settings, target.prompts.run_salt, parts[i], conc[i] or None,
                                   send_until_s, i == 0, barrier, start, lock) for i in range(n)]
            results = [f.result() for f in futures]
    records: list[RequestRecord] = []
    target.last_probes, target.stopped_early = [], None
    t0 = min(r[1] for r in results)
    for recs, wt0, probes, _ in results:
        shift = wt0 - t0  # every process used the same start, so this is ~0; kept exact anyway
        for rec in recs:
            if not rec.warmup and shift:
                rec.sent_s += shift
                rec.first_token_s = None if rec.first_token_s is None else rec.first_token_s + shift
                rec.done_s = None if rec.done_s is None else rec.done_s + shift
                rec.token_times = [t + shift for t in rec.token_times]
        records += recs
        target.last_probes += probes
    target.t0 = t0
    target.last_client = merge([r[3] for r in results])
    by_id = {r.id: i for i, r in enumerate(requests)}
    records.sort(key=lambda r: by_id.get(r.id, 0))
    return records


def merge(parts: list[dict[str, float]]) -> dict[str, float]:
    """One run's client keys from several processes: summed counts, the worst of everything else
    (a P99 over the whole run is at most the worst process's P99 where every process has its share)."""
    out: dict[str, float] = {}
    for part in parts:
        for k, v in part.items():
            if k in _SUMMED:
                out[k] = out.get(k, 0.0) + v
            elif k in _LEAST:
                out[k] = min(out.get(k, v), v) if v == v else float("nan")
            else:
                out[k] = max(out.get(k, v), v) if v == v else float("nan")
    return out


def _worker(cls: type[HttpTarget], settings: dict[str, Any], salt: int, requests: list[Request], concurrency: int | None,
            send_until_s: float | None, probes: bool, barrier: Any, start: Any,
            lock: Any) -> tuple[list[RequestRecord], float, list[dict[str, Any]], dict[str, float]]:
    target = cls(**{**settings, "scrape_metrics": settings["scrape_metrics"] and probes})
    target.prompts.run_salt = salt - 1  # run() bumps it back to the parent's value

    def window_start() -> float:
        barrier.wait()
        with lock:
            if start.value == 0.0:
                start.value = time.perf_counter() + START_DELAY_S
            return float(start.value)

    target.window_start = window_start
    records = target.run(requests, concurrency=concurrency, send_until_s=send_until_s)
    return records, target.t0, target.last_probes, target.last_client
