"""The result JSON of `vllm bench serve --save-result`, written from servetune's records.

Same keys and definitions (tuner.common.metric_keys), so a vLLM user's scripts read it unchanged:
`duration`, `completed`, `request_throughput`, `output_throughput`, `mean_/median_/std_/p<N>_<metric>_ms`
for the metrics of `--percentile-metrics` at the percentiles of `--metric-percentiles`, and
`max_output_tokens_per_s` / `max_concurrent_requests` over one-second bins. With `detailed`, the
per-request lists (`input_lens`, `output_lens`, `ttfts`, `itls` in seconds, `errors`) as vLLM's
`--save-detailed`; `generated_texts` are empty strings (servetune does not keep the text).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from tuner.load.metrics import latencies
from tuner.load.records import RequestRecord

DEFAULT_METRICS = ("ttft", "tpot", "itl")  # vLLM's --percentile-metrics default
DEFAULT_PERCENTILES = (99.0,)  # vLLM's --metric-percentiles default


def percentile_word(p: float) -> str:
    """vLLM's key spelling: 99 -> 'p99', 99.9 -> 'p99.9'."""
    return f"p{int(p)}" if p == int(p) else f"p{p:g}"


def result_json(records: Sequence[RequestRecord], summary: Mapping[str, float], *, run: Mapping[str, Any],
                metrics: Sequence[str] = DEFAULT_METRICS, percentiles: Sequence[float] = DEFAULT_PERCENTILES,
                goodput: bool = False, detailed: bool = False) -> dict[str, Any]:
    """One load run as vLLM writes it; `run` holds the header fields (model_id, request_rate, ...)."""
    measured = [r for r in records if not r.warmup and not (r.error or "").startswith("cancelled")]
    out: dict[str, Any] = {
        "date": datetime.now().strftime("%Y%m%d-%H%M%S"), "endpoint_type": "openai", "backend": "servetune",
        "label": None, **run,
        "duration": summary.get("duration"), "completed": int(summary.get("completed", 0)),
        "failed": int(summary.get("failed", 0)),
        "total_input_tokens": int(summary.get("total_input_tokens", 0)),
        "total_output_tokens": int(summary.get("total_output_tokens", 0)),
        "request_throughput": summary.get("request_throughput"),
        "request_goodput": summary.get("request_goodput") if goodput else None,
        "output_throughput": summary.get("output_throughput"),
        "total_token_throughput": summary.get("total_token_throughput"),
        **_peaks(measured),
    }
    lat = latencies(measured)
    for m in metrics:
        values = lat[m]
        empty = values.size == 0
        out[f"mean_{m}_ms"] = None if empty else float(values.mean())
        out[f"median_{m}_ms"] = None if empty else float(np.median(values))
        out[f"std_{m}_ms"] = None if empty else float(values.std())
        for p in percentiles:
            out[f"{percentile_word(p)}_{m}_ms"] = None if empty else float(np.percentile(values, p))
    if detailed:
        out.update({
            "input_lens": [r.input_len for r in measured], "output_lens": [r.output_tokens for r in measured],
            "ttfts": [r.ttft_s or 0.0 for r in measured],
            "itls": [np.diff(r.token_times).tolist() if len(r.token_times) > 1 else [] for r in measured],
            "generated_texts": ["" for _ in measured], "errors": [r.error or "" for r in measured],
        })
    return out


def _peaks(records: Sequence[RequestRecord]) -> dict[str, float | int | None]:
    """vLLM's peaks over one-second bins from the first send: most output tokens in a bin, and most
    finished requests whose lifetime touches a bin (so it can exceed --max-concurrency, as in vLLM)."""
    ok = [r for r in records if r.ok and r.done_s is not None]
    if not ok:
        return {"max_output_tokens_per_s": None, "max_concurrent_requests": None}
    start = min(r.sent_s for r in ok)
    bins = int(np.ceil(max(r.done_s for r in ok if r.done_s is not None) - start)) + 1
    tokens = np.zeros(bins)
    touching = np.zeros(bins, dtype=int)
    for r in ok:
        for t in r.token_times:
            tokens[int(t - start)] += 1
        touching[int(r.sent_s - start):int(r.done_s - start) + 1] += 1  # type: ignore[operator]
    return {"max_output_tokens_per_s": float(tokens.max()), "max_concurrent_requests": int(touching.max())}
