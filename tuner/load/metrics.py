"""The summary of a load run, under `vllm bench serve`'s names and definitions (keys: tuner.common.metric_keys).

- TTFT: first streamed token - sent. E2EL: done - sent. TPOT: (E2EL - TTFT) / (output tokens - 1),
  for requests with >= 2 output tokens. ITL: every gap between consecutive streamed chunks, pooled
  over requests. All in milliseconds; percentiles by linear interpolation (numpy's default, as vLLM).
- jitter_<m> = std / mean of that latency (the seeds' jitter coefficient).
- rates over `duration` (given, else first send to last finish of the measured requests).
- request_goodput: vLLM's count: finished requests whose own TTFT, TPOT and E2EL meet every SLA limit
  on those metrics (whatever the term's statistic: a limit is a per-request SLO), per second. A
  request with < 2 output tokens has TPOT 0 for this, as in vLLM.
- request_goodput_strict: also every streamed gap of the request within the ITL limit (not vLLM's).
Warm-up records are excluded, and so are requests the client cancelled itself when it stopped a
load point early (counted as `cancelled`, not as failures). Abnormal classes (the mixed profile's
over-16K requests) are left out of the top-level keys and reported only under `class.<name>.*`.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

import numpy as np

from tuner.common.metric_keys import JITTER_METRICS, LATENCY_METRICS, PERCENTILES, jitter_key, latency_key
from tuner.load.profiles import ABNORMAL
from tuner.load.records import RequestRecord
from tuner.spec.sla import SLATerm

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
                    if k != "duration"})
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
    """mean, std (population), median, percentiles and max; NaN when there are no values."""
    if values.size == 0:
        return {"mean": NAN, "std": NAN, "median": NAN, **{k: NAN for k in PERCENTILES}, "max": NAN}
    pct = np.percentile(values, list(PERCENTILES.values()))
    by = {k: float(v) for k, v in zip(PERCENTILES, pct, strict=True)}
    return {"mean": float(values.mean()), "std": float(values.std()), "median": by["p50"], **by,
            "max": float(values.max())}


def latencies(records: Sequence[RequestRecord]) -> dict[str, np.ndarray]:
    """Per-metric arrays in milliseconds over finished requests (ITL pooled over all gaps)."""
    ok = [r for r in records if r.ok]
    ttft = [r.ttft_s for r in ok if r.ttft_s is not None]
    tpot = [r.tpot_s for r in ok if r.tpot_s is not None]
    e2el = [r.e2e_s for r in ok if r.e2e_s is not None]
    gaps = [np.diff(r.token_times) for r in ok if len(r.token_times) > 1]
    itl = np.concatenate(gaps) if gaps else np.zeros(0)
    return {"ttft": np.asarray(ttft, dtype=float) * 1e3, "tpot": np.asarray(tpot, dtype=float) * 1e3,
            "itl": itl * 1e3, "e2el": np.asarray(e2el, dtype=float) * 1e3}


def meets_request(r: RequestRecord, sla: Sequence[SLATerm], *, strict: bool = False) -> bool:
    """One finished request against every per-request SLO: the goodput rule (vLLM's unless `strict`).

    vLLM's goodput takes TTFT, TPOT and E2EL SLOs; `strict` also holds every ITL gap to an ITL limit.
    """
    if not r.ok:
        return False
    for term in sla:
        parts = term.latency
        if parts is None:
            continue  # error_rate: not a per-request figure
        metric = parts[1]
        if metric == "itl":
            if not strict:
                continue
            value = float(np.max(np.diff(r.token_times))) if len(r.token_times) > 1 else None
        else:
            value = {"ttft": r.ttft_s, "tpot": r.tpot_s, "e2el": r.e2e_s}[metric]
        if value is not None and value * 1e3 > term.limit:
            return False
    return True


def _summary(records: Sequence[RequestRecord], sla: Sequence[SLATerm], duration_s: float) -> dict[str, float]:
    out: dict[str, float] = {}
    lat = latencies(records)
    for metric in LATENCY_METRICS:
        for stat, v in stats(lat[metric]).items():
            out[latency_key(stat, metric)] = v
    for m in JITTER_METRICS:
        mean, std = out[latency_key("mean", m)], out[latency_key("std", m)]
        out[jitter_key(m)] = std / mean if mean and not math.isnan(mean) else NAN
    ok = [r for r in records if r.ok]
    completed, failed = len(ok), len(records) - len(ok)
    out_tokens = sum(r.output_tokens for r in ok)
    in_tokens = sum(r.input_len for r in ok)
    good = sum(meets_request(r, sla) for r in ok)
    good_strict = sum(meets_request(r, sla, strict=True) for r in ok)
    per_s = 1.0 / duration_s if duration_s > 0 else NAN
    out.update({
        "request_throughput": completed * per_s,
        "output_throughput": out_tokens * per_s,
        "total_token_throughput": (in_tokens + out_tokens) * per_s,
        "request_goodput": good * per_s,
        "request_goodput_strict": good_strict * per_s,
        "error_rate": failed / len(records) if records else 0.0,
        "completed": float(completed),
        "failed": float(failed),
        "total_input_tokens": float(in_tokens),
        "total_output_tokens": float(out_tokens),
        "duration": float(duration_s),
    })
    return out
