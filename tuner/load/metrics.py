"""The summary of a load run: documented metric definitions (docs/load.md), vLLM's where names match.

- TTFT: first streamed token - sent. E2E: done - sent. TPOT: (E2E - TTFT) / (output tokens - 1),
  for requests with >= 2 output tokens. ITL: every gap between consecutive streamed chunks, pooled
  over requests. All in milliseconds; percentiles by linear interpolation (numpy's default, as vLLM).
- jitter.<m> = std / mean of that latency (the seeds' jitter coefficient).
- rates over `duration_s` (given, else first send to last finish of the measured requests).
- goodput_rps: finished requests whose own TTFT, TPOT, E2E (and largest ITL gap) meet every
  latency limit of the SLA, per second.
Warm-up records are excluded, and so are requests the client cancelled itself when it stopped a
load point early (counted as `cancelled`, not as failures). Abnormal classes (the mixed profile's over-16K requests) are left out
of the top-level keys and reported only under `class.<name>.*`.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

import numpy as np

from tuner.load.profiles import ABNORMAL
from tuner.load.records import RequestRecord
from tuner.spec.sla import SLATerm

LATENCIES = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")
PERCENTILES = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "p99.9": 99.9}
NAN = float("nan")
CANCELLED = "cancelled"  # prefix of the error of requests the client itself cancelled (early stop)


def summarize(records: Sequence[RequestRecord], *, sla: Sequence[SLATerm] = (), duration_s: float | None = None,
              abnormal: Collection[str] = (ABNORMAL,)) -> dict[str, float]:
    """Flat metrics (keys in docs/load.md), overall and per class (`class.<name>.<key>`)."""
    measured = [r for r in records if not r.warmup and not _cancelled(r)]
    cancelled = sum(1 for r in records if not r.warmup and _cancelled(r))
    if duration_s is None:
        duration_s = span(measured)
    normal = [r for r in measured if r.cls not in abnormal]
    out = _summary(normal, sla, duration_s)
    out["cancelled"] = float(cancelled)
    for name in sorted({r.cls for r in measured}):
        cls = [r for r in measured if r.cls == name]
        out.update({f"class.{name}.{k}": v for k, v in _summary(cls, sla, duration_s).items()
                    if k != "duration_s"})
    return out


def _cancelled(r: RequestRecord) -> bool:
    return r.error is not None and r.error.startswith(CANCELLED)


def span(records: Sequence[RequestRecord]) -> float:
    """First send to last finish (or last seen token) of these records, in seconds."""
    if not records:
        return 0.0
    start = min(r.sent_s for r in records)
    ends = [r.done_s if r.done_s is not None else (r.token_times[-1] if r.token_times else r.sent_s)
            for r in records]
    return max(ends) - start


def stats(values: np.ndarray) -> dict[str, float]:
    """mean, std (population), percentiles and max; NaN when there are no values."""
    if values.size == 0:
        return {"mean": NAN, "std": NAN, **{k: NAN for k in PERCENTILES}, "max": NAN}
    pct = np.percentile(values, list(PERCENTILES.values()))
    return {"mean": float(values.mean()), "std": float(values.std()),
            **{k: float(v) for k, v in zip(PERCENTILES, pct, strict=True)}, "max": float(values.max())}


def latencies(records: Sequence[RequestRecord]) -> dict[str, np.ndarray]:
    """Per-metric arrays in milliseconds over finished requests (ITL pooled over all gaps)."""
    ok = [r for r in records if r.ok]
    ttft = [r.ttft_s for r in ok if r.ttft_s is not None]
    tpot = [r.tpot_s for r in ok if r.tpot_s is not None]
    e2e = [r.e2e_s for r in ok if r.e2e_s is not None]
    gaps = [np.diff(r.token_times) for r in ok if len(r.token_times) > 1]
    itl = np.concatenate(gaps) if gaps else np.zeros(0)
    return {"ttft_ms": np.asarray(ttft, dtype=float) * 1e3, "tpot_ms": np.asarray(tpot, dtype=float) * 1e3,
            "itl_ms": itl * 1e3, "e2e_ms": np.asarray(e2e, dtype=float) * 1e3}


def meets_request(r: RequestRecord, sla: Sequence[SLATerm]) -> bool:
    """One finished request against every latency limit (the goodput rule)."""
    if not r.ok:
        return False
    for term in sla:
        metric = term.metric.partition(".")[0]
        if metric == "error_rate":
            continue
        if metric == "itl_ms":
            value = float(np.max(np.diff(r.token_times))) if len(r.token_times) > 1 else None
        else:
            value = {"ttft_ms": r.ttft_s, "tpot_ms": r.tpot_s, "e2e_ms": r.e2e_s}[metric]
        if value is not None and value * 1e3 > term.limit:
            return False
    return True


def _summary(records: Sequence[RequestRecord], sla: Sequence[SLATerm], duration_s: float) -> dict[str, float]:
    out: dict[str, float] = {}
    lat = latencies(records)
    for metric in LATENCIES:
        for k, v in stats(lat[metric]).items():
            out[f"{metric}.{k}"] = v
    for m in ("ttft", "tpot", "e2e"):
        mean, std = out[f"{m}_ms.mean"], out[f"{m}_ms.std"]
        out[f"jitter.{m}"] = std / mean if mean and not math.isnan(mean) else NAN
    ok = [r for r in records if r.ok]
    completed, failed = len(ok), len(records) - len(ok)
    out_tokens = sum(r.output_tokens for r in ok)
    in_tokens = sum(r.input_len for r in ok)
    good = sum(meets_request(r, sla) for r in ok)
    per_s = 1.0 / duration_s if duration_s > 0 else NAN
    out.update({
        "requests_per_s": completed * per_s,
        "output_tokens_per_s": out_tokens * per_s,
        "total_tokens_per_s": (in_tokens + out_tokens) * per_s,
        "goodput_rps": good * per_s,
        "error_rate": failed / len(records) if records else 0.0,
        "completed": float(completed),
        "failed": float(failed),
        "duration_s": float(duration_s),
    })
    return out
