"""SLA terms as tiny typed objects parsed from strings like ``p99_ttft_ms <= 500``.

A term names a statistic of a latency metric (``p50``...``p99.9`` written ``p999``, ``mean``, ``max``)
or a rate (``error_rate``). `violation()` is the normalised excess used as an Optuna constraint:
<= 0 means feasible.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tuner.common.errors import SpecError

LATENCY_METRICS = ("ttft", "tpot", "itl", "e2e")
STATS = {"p50": "p50", "p90": "p90", "p95": "p95", "p99": "p99", "p999": "p99.9", "mean": "mean", "max": "max"}
_TERM = re.compile(r"^\s*([a-z0-9_.]+)\s*(<=|<)\s*([0-9]*\.?[0-9]+(?:e[+-]?\d+)?)\s*$")
_NAME = re.compile(r"^(p50|p90|p95|p99|p999|mean|max)_(ttft|tpot|itl|e2e)_ms$")


_SUMMARY_STATS = ("mean", "std", "p50", "p90", "p95", "p99", "p99.9", "max")
SUMMARY_KEYS = frozenset(
    [f"{m}_ms.{s}" for m in LATENCY_METRICS for s in _SUMMARY_STATS]
    + [f"jitter.{m}" for m in ("ttft", "tpot", "e2e")]
    + ["requests_per_s", "output_tokens_per_s", "total_tokens_per_s", "goodput_rps", "error_rate",
       "completed", "failed", "duration_s"]
)


def is_summary_key(key: str) -> bool:
    """A key tuner.load.metrics.summarize produces: e.g. ``ttft_ms.p99`` or ``class.chat.goodput_rps``."""
    if key.startswith("class."):
        name, _, rest = key.removeprefix("class.").partition(".")
        return bool(name) and rest in SUMMARY_KEYS
    return key in SUMMARY_KEYS


@dataclass(frozen=True)
class SLATerm:
    name: str  # e.g. p99_ttft_ms
    limit: float

    @property
    def metric(self) -> str:
        """Summary key, e.g. ``ttft_ms.p99`` (see tuner.load.metrics)."""
        if self.name == "error_rate":
            return "error_rate"
        m = _NAME.match(self.name)
        assert m is not None  # validated in parse
        return f"{m.group(2)}_ms.{STATS[m.group(1)]}"

    def violation(self, summary: dict[str, float]) -> float:
        """(value - limit) / limit: <= 0 feasible. Missing value counts as a full violation."""
        value = summary.get(self.metric)
        if value is None or value != value:  # missing or NaN
            return 1.0
        scale = self.limit if self.limit > 0 else 1.0
        return (value - self.limit) / scale

    def __str__(self) -> str:
        return f"{self.name} <= {self.limit:g}"


def parse_term(text: str, where: str = "sla") -> SLATerm:
    m = _TERM.match(text.lower())
    if not m:
        raise SpecError(
            f"cannot parse SLA term {text!r}",
            where,
            "write terms like 'p99_ttft_ms <= 500' (statistic_metric_ms <= number)",
        )
    name, _, value = m.groups()
    if name != "error_rate" and not _NAME.match(name):
        raise SpecError(
            f"unknown SLA term {name!r}",
            where,
            "use <stat>_<metric>_ms with stat in p50,p90,p95,p99,p999,mean,max and metric in "
            "ttft,tpot,itl,e2e (e.g. p99_ttft_ms), or error_rate",
        )
    limit = float(value)
    if limit <= 0:
        raise SpecError(f"SLA limit for {name} must be > 0, got {limit:g}", where, "give a positive limit")
    if name == "error_rate" and limit > 1:
        raise SpecError(f"error_rate is a fraction of requests, got {limit:g}", where,
                        "write e.g. 'error_rate <= 0.01' for 1%")
    return SLATerm(name, limit)


def parse_sla(text: str | list[str], where: str = "sla") -> list[SLATerm]:
    """Parse ``"p99_ttft_ms<=500,p99_e2e_ms<=8000"`` or a list of terms."""
    items = text.split(",") if isinstance(text, str) else list(text)
    terms = [parse_term(t, f"{where}[{i}]") for i, t in enumerate(items) if t.strip()]
    names = [t.name for t in terms]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise SpecError(f"SLA term(s) given twice: {sorted(dup)}", where, "keep one limit per term")
    return terms


def max_violation(terms: list[SLATerm], summary: dict[str, float]) -> float:
    return max((t.violation(summary) for t in terms), default=-1.0)


def meets(terms: list[SLATerm], summary: dict[str, float]) -> bool:
    return max_violation(terms, summary) <= 0
