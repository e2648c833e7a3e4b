"""SLA terms as tiny typed objects parsed from strings like ``p99_ttft_ms <= 500``.

A term is written with the summary key it limits (tuner.common.metric_keys: vLLM's names, e.g.
``p99_ttft_ms``, ``p99.9_e2el_ms``, ``mean_tpot_ms``) or ``error_rate``. `violation()` is the
normalised excess used as an Optuna constraint: <= 0 means feasible.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from tuner.common.errors import SpecError
from tuner.common.metric_keys import (
    ERROR_RATE,
    LATENCY_METRICS,
    SLA_STATS,
    SUMMARY_KEYS,
    is_summary_key,
    renamed,
    split_latency,
)

__all__ = ["SUMMARY_KEYS", "SLATerm", "is_summary_key", "max_violation", "meets", "parse_sla", "parse_term"]

_TERM = re.compile(r"^\s*([a-z0-9_.]+)\s*(<=|<)\s*([0-9]*\.?[0-9]+(?:e[+-]?\d+)?)\s*$")
_HELP = (f"use <stat>_<metric>_ms with stat in {','.join(SLA_STATS)} and metric in {','.join(LATENCY_METRICS)} "
         "(vLLM's names, e.g. p99_ttft_ms, p99_e2el_ms), or error_rate")


def renamed_hint(key: str) -> str | None:
    """'renamed: write X' for a key in an old spelling; None when the key was never ours."""
    new = renamed(key)
    if new is None:
        return None
    extra = " (request_goodput is vLLM's count, without the ITL check)" if new.endswith("request_goodput_strict") else ""
    return f"{key!r} is now {new!r} (vLLM's name){extra}: write {new}"


@dataclass(frozen=True)
class SLATerm:
    name: str  # the summary key it limits, e.g. p99_ttft_ms
    limit: float

    @property
    def metric(self) -> str:
        """The summary key this term limits (the name itself: one style for both)."""
        return self.name

    @property
    def latency(self) -> tuple[str, str] | None:
        """(stat, metric) such as ("p99", "ttft"); None for error_rate."""
        return split_latency(self.name)

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
    if name != ERROR_RATE:
        hint = renamed_hint(name)
        if hint is not None:
            raise SpecError(f"old SLA term name {name!r}", where, hint)
        parts = split_latency(name)
        if parts is None or parts[0] not in SLA_STATS:
            raise SpecError(f"unknown SLA term {name!r}", where, _HELP)
    limit = float(value)
    if not math.isfinite(limit):
        raise SpecError(f"SLA limit {value} for {name} is not a finite number", where,
                        f"give a limit in milliseconds, e.g. '{name} <= 500'")
    if limit <= 0:
        raise SpecError(f"SLA limit for {name} must be > 0, got {limit:g}", where, "give a positive limit")
    if name == ERROR_RATE and limit > 1:
        raise SpecError(f"error_rate is a fraction of requests, got {limit:g}", where,
                        "write e.g. 'error_rate <= 0.01' for 1%")
    if name != "error_rate":
        check_plausible(name, limit, where)
    return SLATerm(name, limit)


def check_plausible(name: str, limit: float, where: str) -> None:
    """Latency limits are milliseconds: below 0.1 ms or above a day is a unit slip (seconds, microseconds)."""
    if limit < 0.1:
        raise SpecError(f"SLA limit {limit:g} ms for {name} is implausibly small (limits are in milliseconds)",
                        where, f"for {limit:g} seconds write '{name} <= {limit * 1000:g}'")
    if limit > 86_400_000:
        raise SpecError(f"SLA limit {limit:g} ms for {name} is more than a day (limits are in milliseconds)",
                        where, f"for {limit:g} microseconds write '{name} <= {limit / 1000:g}'")


def parse_sla(text: str | list[str], where: str = "sla") -> list[SLATerm]:
    """Parse ``"p99_ttft_ms<=500,p99_e2el_ms<=8000"`` or a list of terms."""
    items = text.split(",") if isinstance(text, str) else list(text)
    if not isinstance(text, str):  # a list item left empty is a term lost, not a trailing comma
        for i, t in enumerate(items):
            if isinstance(t, str) and not t.strip():
                raise SpecError("SLA term is empty", f"{where}[{i}]", "write a term like 'p99_ttft_ms <= 500', "
                                "or remove the empty item")
    terms = [parse_term(t, f"{where}[{i}]") for i, t in enumerate(items) if t.strip()]
    names = [t.name for t in terms]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise SpecError(f"SLA term(s) given twice: {sorted(dup)}", where, "keep one limit per term")
    same = {t.name.replace("median_", "p50_", 1): t.name for t in terms if t.name.startswith("median_")}
    twin = next((n for n in names if n in same), None)
    if twin is not None:  # vLLM's median is its p50: two limits on one statistic, one of them never binds
        raise SpecError(f"{same[twin]} and {twin} are the same statistic (the median is the 50th percentile)",
                        where, f"keep one limit: {same[twin]} or {twin}")
    return terms


def max_violation(terms: list[SLATerm], summary: dict[str, float]) -> float:
    return max((t.violation(summary) for t in terms), default=-1.0)


def meets(terms: list[SLATerm], summary: dict[str, float]) -> bool:
    return max_violation(terms, summary) <= 0
