"""Metric definitions on hand-made records whose values are known exactly."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tuner.load.metrics import summarize
from tuner.load.records import RequestRecord
from tuner.spec.sla import parse_sla


def rec(i: int, sent: float, ttft: float, itl: float, n: int, cls: str = "a", **kw: object) -> RequestRecord:
    times = [sent + ttft + k * itl for k in range(n)]
    return RequestRecord(id=i, cls=cls, input_len=100, output_len=n, sent_s=sent, first_token_s=times[0],
                         done_s=times[-1], token_times=times, output_tokens=n, **kw)  # type: ignore[arg-type]


def test_definitions() -> None:
    records = [rec(i, sent=i * 0.1, ttft=0.05 + 0.01 * i, itl=0.002 * (i + 1), n=5) for i in range(10)]
    s = summarize(records)
    ttft = np.array([0.05 + 0.01 * i for i in range(10)]) * 1e3
    assert s["mean_ttft_ms"] == pytest.approx(ttft.mean())
    assert s["std_ttft_ms"] == pytest.approx(ttft.std())
    assert s["p99_ttft_ms"] == pytest.approx(np.percentile(ttft, 99))
    assert s["p99.9_ttft_ms"] == pytest.approx(np.percentile(ttft, 99.9))
    assert s["max_ttft_ms"] == pytest.approx(140.0)
    # TPOT = (E2E - TTFT) / (n - 1) = itl here; ITL pools every gap (4 per request)
    tpot = np.array([0.002 * (i + 1) for i in range(10)]) * 1e3
    assert s["p50_tpot_ms"] == pytest.approx(np.percentile(tpot, 50))
    assert s["mean_itl_ms"] == pytest.approx(tpot.mean())
    assert s["max_e2el_ms"] == pytest.approx(140 + 4 * 20)
    assert s["jitter_ttft"] == pytest.approx(ttft.std() / ttft.mean())
    duration = records[-1].done_s - 0.0  # type: ignore[operator]
    assert s["duration"] == pytest.approx(duration) and s["median_ttft_ms"] == s["p50_ttft_ms"]
    assert s["total_input_tokens"] == 1000 and s["total_output_tokens"] == 50
    assert s["request_throughput"] == pytest.approx(10 / duration)
    assert s["output_throughput"] == pytest.approx(50 / duration)
    assert s["total_token_throughput"] == pytest.approx(1050 / duration)
    assert s["completed"] == 10 and s["failed"] == 0 and s["error_rate"] == 0


def test_goodput_errors_warmup_and_classes() -> None:
    good = [rec(i, 0.0, ttft=0.1, itl=0.01, n=11, cls="fast") for i in range(6)]
    slow = [rec(10 + i, 0.0, ttft=0.9, itl=0.01, n=11, cls="slow") for i in range(3)]
    failed = RequestRecord(id=20, cls="slow", input_len=5, output_len=5, sent_s=0.0, error="http 500: x")
    warm = rec(30, 0.0, ttft=50.0, itl=1.0, n=3, warmup=True)
    s = summarize([*good, *slow, failed, warm], sla=parse_sla("p99_ttft_ms<=500"), duration_s=2.0)
    assert s["completed"] == 9 and s["failed"] == 1 and s["error_rate"] == pytest.approx(0.1)
    assert s["request_goodput"] == pytest.approx(6 / 2.0)
    assert s["request_throughput"] == pytest.approx(9 / 2.0)
    assert s["max_ttft_ms"] == pytest.approx(900)  # the warm-up request's 50 s is excluded
    assert s["class.fast.completed"] == 6 and s["class.slow.failed"] == 1
    assert s["class.slow.p50_ttft_ms"] == pytest.approx(900)
    assert s["class.fast.request_goodput"] == pytest.approx(3.0)


def test_abnormal_class_is_counted_separately() -> None:
    normal = [rec(i, 0.0, 0.1, 0.01, 4) for i in range(9)]
    bad = RequestRecord(id=9, cls="abnormal", input_len=20000, output_len=128, sent_s=0.0, error="http 400: too long")
    s = summarize([*normal, bad])
    assert s["error_rate"] == 0 and s["completed"] == 9
    assert s["class.abnormal.failed"] == 1 and s["class.abnormal.error_rate"] == 1


def test_empty_and_single_token() -> None:
    s = summarize([])
    assert math.isnan(s["p99_ttft_ms"]) and s["completed"] == 0 and s["error_rate"] == 0
    one = rec(0, 0.0, 0.1, 0.0, 1)
    s = summarize([one])
    assert math.isnan(s["mean_tpot_ms"]) and math.isnan(s["p50_itl_ms"]) and s["p50_ttft_ms"] == pytest.approx(100)


def test_requests_cancelled_by_an_early_stop_are_not_failures() -> None:
    done = [rec(i, 0.0, 0.1, 0.01, 4) for i in range(4)]
    cut = RequestRecord(id=9, cls="a", input_len=5, output_len=5, sent_s=0.0, error="cancelled: load point stopped early")
    s = summarize([*done, cut])
    assert s["cancelled"] == 1 and s["failed"] == 0 and s["error_rate"] == 0 and s["completed"] == 4


def test_goodput_is_vllms_and_the_itl_check_has_its_own_name() -> None:
    """vLLM's goodput holds each request to TTFT/TPOT/E2EL SLOs only; an ITL stall counts in the strict one."""
    smooth = [rec(i, 0.0, ttft=0.1, itl=0.01, n=11) for i in range(4)]
    stall = rec(9, 0.0, ttft=0.1, itl=0.01, n=11)
    stall.token_times[5:] = [t + 0.5 for t in stall.token_times[5:]]  # one 510 ms gap; TPOT stays 60 ms
    stall.done_s = stall.token_times[-1]
    sla = parse_sla("p99_ttft_ms<=500,p99_itl_ms<=100,p99_tpot_ms<=80")
    s = summarize([*smooth, stall], sla=sla, duration_s=1.0)
    assert s["request_goodput"] == pytest.approx(5.0)
    assert s["request_goodput_strict"] == pytest.approx(4.0)
    tight = summarize([*smooth, stall], sla=parse_sla("mean_tpot_ms<=50"), duration_s=1.0)
    assert tight["request_goodput"] == pytest.approx(4.0)  # a limit is a per-request SLO, whatever its statistic


def test_every_summary_key_is_in_the_schema_and_back() -> None:
    from tuner.common.metric_keys import SUMMARY_KEYS, is_summary_key

    s = summarize([rec(i, 0.0, 0.1, 0.01, 4, cls="c") for i in range(3)], sla=parse_sla("p99_ttft_ms<=500"))
    top = {k for k in s if not k.startswith("class.")} - {"cancelled"}
    assert top == set(SUMMARY_KEYS)
    assert all(is_summary_key(k) for k in s if k != "cancelled")
