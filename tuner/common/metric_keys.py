"""The one vocabulary of metric keys: the load summary, SLA terms, objectives, trials.parquet, MLflow.

Names follow `vllm bench serve` (its result JSON), so a user compares figures without translating:
``<stat>_<metric>_ms`` with metric ``ttft tpot itl e2el`` and stat ``mean std median p50 p90 p95 p99
p99.9 max``; rates ``request_throughput``, ``output_throughput``, ``total_token_throughput``,
``request_goodput``. Our additions keep that style: ``jitter_<metric>``, ``request_goodput_strict``,
``error_rate``, ``cancelled``. Per workload class: ``class.<name>.<key>``.

An SLA term is written with the very key it limits (``p99_ttft_ms <= 500``), so a study file has one
style. Older names (``ttft_ms.p99``, ``p99_e2e_ms``, ``p999_itl_ms``, ``output_tokens_per_s``...) are
refused with the new name in the message (`renamed`), never silently mapped: a study that ran under
one name and is read under another would compare unlike figures.
"""

from __future__ import annotations

import re

LATENCY_METRICS = ("ttft", "tpot", "itl", "e2el")
STATS = ("mean", "std", "median", "p50", "p90", "p95", "p99", "p99.9", "max")
PERCENTILES = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "p99.9": 99.9}  # median = p50
SLA_STATS = tuple(s for s in STATS if s != "std")  # a limit on a spread is not a latency SLO
JITTER_METRICS = ("ttft", "tpot", "e2el")  # std / mean; ITL gaps are pooled, their spread is the tail

REQUEST_THROUGHPUT = "request_throughput"  # finished requests / duration
OUTPUT_THROUGHPUT = "output_throughput"  # output tokens of finished requests / duration
TOTAL_TOKEN_THROUGHPUT = "total_token_throughput"  # (input + output tokens) / duration
REQUEST_GOODPUT = "request_goodput"  # vLLM's: requests meeting every TTFT/TPOT/E2EL SLO / duration
REQUEST_GOODPUT_STRICT = "request_goodput_strict"  # also every ITL gap within the ITL limit
ERROR_RATE = "error_rate"
DURATION = "duration"  # seconds, vLLM's name

RATES = (REQUEST_THROUGHPUT, OUTPUT_THROUGHPUT, TOTAL_TOKEN_THROUGHPUT, REQUEST_GOODPUT, REQUEST_GOODPUT_STRICT)
COUNTS = ("completed", "failed", "total_input_tokens", "total_output_tokens", DURATION, ERROR_RATE)
GOODPUT_METRICS = ("ttft", "tpot", "e2el")  # the per-request SLOs vLLM's --goodput accepts


def latency_key(stat: str, metric: str) -> str:
    """``latency_key("p99", "ttft") == "p99_ttft_ms"``."""
    return f"{stat}_{metric}_ms"


def jitter_key(metric: str) -> str:
    return f"jitter_{metric}"


SUMMARY_KEYS = frozenset(
    [latency_key(s, m) for m in LATENCY_METRICS for s in STATS]
    + [jitter_key(m) for m in JITTER_METRICS] + list(RATES) + list(COUNTS)
)
_LATENCY = re.compile(r"^(mean|std|median|p50|p90|p95|p99|p99\.9|max)_(ttft|tpot|itl|e2el)_ms$")


def split_latency(key: str) -> tuple[str, str] | None:
    """(stat, metric) of a latency key, e.g. ``("p99", "ttft")``; None for any other key."""
    m = _LATENCY.match(key)
    return (m.group(1), m.group(2)) if m else None


_LOWER_IS_BETTER = frozenset({ERROR_RATE, "failed", DURATION})


def natural_direction(key: str) -> str:
    """"minimize" for latencies, their jitter, errors and failures; "maximize" for rates and counts of
    work done. A key's direction is a property of what it measures, never a user's choice."""
    base = key.removeprefix("class.").partition(".")[2] if key.startswith("class.") else key
    if split_latency(base) or base.startswith("jitter_") or base in _LOWER_IS_BETTER:
        return "minimize"
    return "maximize"


def is_summary_key(key: str) -> bool:
    """A key tuner.load.metrics.summarize produces: e.g. ``p99_ttft_ms`` or ``class.chat.request_goodput``."""
    if key.startswith("class."):
        name, _, rest = key.removeprefix("class.").partition(".")
        return bool(name) and rest in SUMMARY_KEYS
    return key in SUMMARY_KEYS


_OLD_RATES = {"requests_per_s": REQUEST_THROUGHPUT, "output_tokens_per_s": OUTPUT_THROUGHPUT,
              "total_tokens_per_s": TOTAL_TOKEN_THROUGHPUT, "goodput_rps": REQUEST_GOODPUT_STRICT,
              "duration_s": DURATION}
_OLD_METRIC = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2e": "e2el", "e2el": "e2el"}
_OLD_STAT = {"p999": "p99.9"}
_OLD_DOTTED = re.compile(r"^(ttft|tpot|itl|e2e|e2el)_ms\.(mean|std|p50|p90|p95|p99|p99\.9|p999|max)$")
_OLD_UNDERSCORE = re.compile(r"^(mean|std|median|p50|p90|p95|p99|p99\.9|p999|max)_(ttft|tpot|itl|e2e|e2el)_ms$")
_OLD_JITTER = re.compile(r"^jitter\.(ttft|tpot|e2e)$")


def renamed(key: str) -> str | None:
    """The current name of a key written the old way (``ttft_ms.p99`` -> ``p99_ttft_ms``), else None."""
    prefix = ""
    if key.startswith("class."):
        name, _, key = key.removeprefix("class.").partition(".")
        prefix = f"class.{name}."
    new: str | None = None
    if key in _OLD_RATES:
        new = _OLD_RATES[key]
    elif m := _OLD_DOTTED.match(key):
        new = latency_key(_OLD_STAT.get(m.group(2), m.group(2)), _OLD_METRIC[m.group(1)])
    elif m := _OLD_UNDERSCORE.match(key):
        new = latency_key(_OLD_STAT.get(m.group(1), m.group(1)), _OLD_METRIC[m.group(2)])
    elif m := _OLD_JITTER.match(key):
        new = jitter_key(_OLD_METRIC[m.group(1)])
    if new is None or new == key:
        return None
    return prefix + new
