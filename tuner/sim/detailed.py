"""Per-request `vllm bench serve --save-detailed` results: replay them and judge their P99s.

Why: the summary figures of a 150-prompt run give a P99 TTFT that is its second-largest sample; a sim-vs-real
gap there can be sampling noise as much as model error. With the per-request arrays (ttfts, itls, input_lens,
output_lens and, where the client wrote them, start_times) the simulator is fed the measured send times and
lengths, whole distributions are compared (quantiles P10..P99), and the measured P99s get confidence intervals
(p99_intervals: order statistics for TTFT, a block bootstrap for the pooled, correlated ITLs).
"""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tuner.load.records import Request

QUANTILES = (10, 25, 50, 75, 90, 95, 99)
# bulky per-request text the simulator never reads: dropped when a detailed result is stored (slim)
DROP = ("generated_texts", "errors", "finish_reasons", "error_kinds")


def load_json(path: Path) -> dict[str, Any]:
    """A bench result file, plain or gzip-compressed (.gz)."""
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    data: dict[str, Any] = json.loads(raw)
    return data


TIMES = ("ttfts", "itls", "start_times")  # per-request times (s): stored to the microsecond


def _round(v: Any) -> Any:
    return [_round(x) for x in v] if isinstance(v, list) else round(v, 6) if isinstance(v, float) else v


def slim(data: dict[str, Any]) -> dict[str, Any]:
    """The result without the per-request texts, its per-request times rounded to 1 us (a 400-prompt run's
    ITLs: 4.4 MB of JSON as written, about a fifth of it gzip-compressed after rounding)."""
    return {k: _round(v) if k in TIMES else v for k, v in data.items() if k not in DROP}


@dataclass(frozen=True)
class BenchRun:
    """The successful requests of one detailed run, in send order (seconds)."""

    input_lens: tuple[int, ...]
    output_lens: tuple[int, ...]
    ttfts: tuple[float, ...]
    itls: tuple[tuple[float, ...], ...]
    start_times: tuple[float, ...] | None  # offsets from the first send; None when the client did not write them

    def __len__(self) -> int:
        return len(self.ttfts)


def has_detail(data: dict[str, Any]) -> bool:
    return bool(data.get("ttfts")) and bool(data.get("itls"))


def bench_run(data: dict[str, Any]) -> BenchRun:
    """The per-request arrays of a `--save-detailed` result; failed requests (empty TTFT) left out."""
    ttfts, itls = data["ttfts"], data["itls"]
    ins, outs = data["input_lens"], data["output_lens"]
    starts = data.get("start_times") or None
    keep = [i for i, t in enumerate(ttfts) if t and t > 0]
    if starts is not None:
        keep.sort(key=lambda i: starts[i])
        t0 = starts[keep[0]]
    return BenchRun(
        tuple(int(ins[i]) for i in keep), tuple(int(outs[i]) for i in keep), tuple(float(ttfts[i]) for i in keep),
        tuple(tuple(float(x) for x in itls[i]) for i in keep),
        tuple(float(starts[i] - t0) for i in keep) if starts is not None else None,
    )


def records_run(records: list[Any]) -> BenchRun:
    """servetune's own per-request records (a `requests.parquet` / `records.parquet` read back with
    tuner.load.records_io.to_records) as a BenchRun: the successful, measured (non-warm-up) requests in send order,
    their send times from the first, their streamed token times as inter-token intervals. Tokens read from the socket
    together share one time (several stream events in one read); their zero intervals are dropped, so an interval is
    the time between two reads, as `vllm bench serve` counts one per stream event."""
    ok = sorted((r for r in records if r.ok and not r.warmup and r.first_token_s is not None), key=lambda r: r.sent_s)
    if not ok:
        return BenchRun((), (), (), (), None)
    t0 = ok[0].sent_s
    return BenchRun(
        tuple(int(r.input_len) for r in ok),
        tuple(int(r.output_tokens or len(r.token_times) or r.output_len) for r in ok),
        tuple(float(r.first_token_s - r.sent_s) for r in ok),
        tuple(tuple(float(x) for x in np.diff(np.asarray(r.token_times, dtype=float)) if x > 0) for r in ok),
        tuple(float(r.sent_s - t0) for r in ok),
    )


def bench_requests(run: BenchRun, drawn: np.ndarray) -> list[Request]:
    """The run's requests with their measured lengths, sent at the measured start times, or else at `drawn` (the
    client's own arrival draw, tuner.sim.reference.client_arrivals: send order = draw order)."""
    t = run.start_times if run.start_times is not None else tuple(float(x) for x in drawn[:len(run)])
    assert len(t) == len(run), f"{len(t)} send times for {len(run)} requests"
    return [Request(i, t[i], run.input_lens[i], run.output_lens[i]) for i in range(len(run))]


def run_distribution(run: BenchRun, idx: np.ndarray | None = None) -> dict[str, list[float]]:
    """TTFT and pooled ITL quantiles (ms) of the run (or of the requests `idx`), as
    tuner.sim.reference.distribution gives them for simulated records."""
    sel = range(len(run)) if idx is None else idx
    ttft = np.array([run.ttfts[i] for i in sel]) * 1e3
    itl = np.concatenate([np.asarray(run.itls[i]) for i in sel]) * 1e3
    return {"ttft": np.percentile(ttft, QUANTILES).tolist(), "itl": np.percentile(itl, QUANTILES).tolist()}


def quantile_interval(x: np.ndarray, q: float = 0.99, ci: float = 0.9) -> tuple[float, float]:
    """A distribution-free `ci` interval of the q-quantile of iid samples x: order statistics whose ranks bound the
    Binomial(n, q) count of samples below the quantile; inf where the upper rank lies beyond the largest sample
    (150 samples: the P99 90 % interval is [5th largest, inf))."""
    xs = np.sort(np.asarray(x, dtype=float))
    n = len(xs)
    lg = math.lgamma
    pmf = [math.exp(lg(n + 1) - lg(k + 1) - lg(n - k + 1) + k * math.log(q) + (n - k) * math.log1p(-q))
           for k in range(n + 1)]
    cdf = np.cumsum(pmf)  # cdf[k] = P(K <= k)
    tail = (1 - ci) / 2
    lo_rank = max([r for r in range(1, n + 1) if cdf[r - 1] <= tail], default=0)  # P(K < r) <= tail
    hi_rank = min([r for r in range(1, n + 1) if cdf[r - 1] >= 1 - tail], default=n + 1)  # P(K <= r - 1) >= 1 - tail
    return (float(xs[lo_rank - 1]) if lo_rank else -math.inf, float(xs[hi_rank - 1]) if hi_rank <= n else math.inf)


def p99_intervals(run: BenchRun, n_boot: int = 200, block: int = 20, seed: int = 0,
                  ci: float = 0.9) -> dict[str, tuple[float, float]]:
    """`ci` intervals (ms) of the measured P99 TTFT and P99 ITL.

    TTFT: one sample per request, the P99 an extreme order statistic: the distribution-free interval
    (quantile_interval; a bootstrap cannot go past the largest sample and would understate it). ITL: pooled over
    every request's tokens, the P99 lies well inside the samples but they are correlated (decodes of one step share
    its length): a moving-block bootstrap over the requests in send order (blocks of `block` consecutive requests,
    drawn with replacement up to the run's size)."""
    n = len(run)
    rng = np.random.default_rng(seed)
    itl = [np.asarray(x) * 1e3 for x in run.itls]
    starts = np.arange(max(1, n - block + 1))
    i99 = []
    for _ in range(n_boot):
        picks = rng.choice(starts, size=-(-n // block))
        idx = np.concatenate([np.arange(s, min(s + block, n)) for s in picks])[:n]
        i99.append(np.percentile(np.concatenate([itl[i] for i in idx]), 99))
    lo, hi = (1 - ci) / 2 * 100, (1 + ci) / 2 * 100
    return {"ttft": quantile_interval(np.array(run.ttfts) * 1e3, 0.99, ci),
            "itl": (float(np.percentile(i99, lo)), float(np.percentile(i99, hi)))}
