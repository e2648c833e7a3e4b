"""One vocabulary: SLA terms are summary keys, and old spellings are refused with the new name."""

from __future__ import annotations

import pytest

from tuner.common.errors import SpecError
from tuner.common.metric_keys import SUMMARY_KEYS, renamed, split_latency
from tuner.spec.sla import parse_sla


def test_every_sla_term_names_a_summary_key() -> None:
    for key in SUMMARY_KEYS:
        parts = split_latency(key)
        if parts is None or parts[0] == "std":
            continue
        (term,) = parse_sla(f"{key} <= 10")
        assert term.metric == key and term.latency == parts
    assert parse_sla("error_rate<=0.01")[0].metric == "error_rate"


@pytest.mark.parametrize(("old", "new"), [
    ("ttft_ms.p99", "p99_ttft_ms"), ("e2e_ms.p99.9", "p99.9_e2el_ms"), ("p99_e2e_ms", "p99_e2el_ms"),
    ("p999_itl_ms", "p99.9_itl_ms"), ("output_tokens_per_s", "output_throughput"),
    ("requests_per_s", "request_throughput"), ("goodput_rps", "request_goodput_strict"),
    ("jitter.e2e", "jitter_e2el"), ("class.chat.ttft_ms.p50", "class.chat.p50_ttft_ms"),
])
def test_old_names_map_to_new(old: str, new: str) -> None:
    assert renamed(old) == new and new.removeprefix("class.chat.") in SUMMARY_KEYS


def test_current_names_are_not_renamed() -> None:
    assert all(renamed(k) is None for k in SUMMARY_KEYS)


@pytest.mark.parametrize(("term", "new"), [("p99_e2e_ms <= 8000", "p99_e2el_ms"), ("p999_ttft_ms<=1", "p99.9_ttft_ms"),
                                           ("ttft_ms.p99 <= 500", "p99_ttft_ms")])
def test_old_sla_term_is_a_clear_error(term: str, new: str) -> None:
    with pytest.raises(SpecError) as e:
        parse_sla(term)
    assert f"write {new}" in str(e.value) and "old SLA term name" in str(e.value)
