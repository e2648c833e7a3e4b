"""The client's own timing error: TTFT against a reference server's own figures, and the ruler
that reports the error with every run (no realtime scheduling: how users run it)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from tests.load.conftest import RAW_SERVER, Server
from tuner.load.http1 import KERNEL_STAMPS
from tuner.load.metrics import summarize
from tuner.load.ruler import Ruler, attach, warning
from tuner.load.target import HttpTarget
from tuner.load.workload import generate
from tuner.spec.load import validate
from tuner.spec.sla import parse_sla
from tuner.spec.workload import Workload

KEYS = ("client_error_ms", "p50_client_lag_ms", "p99_client_lag_ms", "max_client_lag_ms", "client_lag_samples",
        "max_client_gc_ms", "total_client_gc_ms", "client_connects", "client_busy", "client_rx_kernel",
        "p99_client_send_gap_ms", "client_shared_tokens", "p99_client_rx_bound_ms", "client_clock_error_ms")


def workload(out: int, warmup: int) -> Workload:
    return validate(Workload, {"classes": [{"name": "a", "weight": 1, "input": {"dist": "fixed", "value": 64},
                                            "output": {"dist": "fixed", "value": out}}],
                               "warmup_requests": warmup}, "test")


@pytest.mark.skipif(sys.platform != "linux", reason="perf_counter is one clock across processes on Linux only")
def test_p99_ttft_within_3ms_of_the_truth(fake_server: Callable[..., Any]) -> None:
    """16 streams in flight (closed loop), 50 ms injected TTFT, 10 ms ITL: the client's P99 TTFT is
    within 3 ms of the truth, the server's first-token write stamp less the client's send stamp (both
    `perf_counter`, one clock on Linux), and every request's first-token stamp is within 3 ms of the
    server's write at P99 (the send stamp: the next test). The truth is not the server's own TTFT (write - handler start): the time its
    loop and aiohttp take to reach a request is latency the client rightly sees (1-8 ms of it on a
    2-core VM), not a client error. The client is not realtime, as users run it: a run delayed by a
    neighbour is repeated (at most 5); a systematic client error fails every run."""
    srv = fake_server("--ttft-ms", "50", "--itl-ms", "10", "--realtime")
    reqs = generate(workload(20, 16), n=96, rate=None, seed=0)
    seen: list[dict[str, float]] = []
    for _ in range(5):
        target = HttpTarget(srv.url, "fake", scrape_metrics=False)
        records = target.run(reqs, concurrency=16)
        s = summarize(records)
        assert s["completed"] == 96 and s["failed"] == 0
        log = {e["rid"]: e["arrived"] for e in srv.get("/log")}
        writes = srv.get("/timings")
        measured = [r for r in records if not r.warmup]
        assert all(r.first_token_s is not None for r in measured)
        sent = np.array([target.t0 + r.sent_s for r in measured])
        first = np.array([target.t0 + (r.first_token_s or 0.0) for r in measured])
        written = np.array([writes[f"st-{r.id}"][-20] for r in measured])  # this run's first of 20 tokens
        arrived = np.array([log[f"st-{r.id}"] for r in measured])
        # the send stamp is taken before the bytes leave, the token's stamp after the server wrote it
        assert (arrived - sent).min() >= -5e-5 and (first - written).min() >= -5e-5, (arrived - sent, first - written)
        assert all(k in target.last_client for k in KEYS)
        assert target.last_client["client_connects"] == 0  # the pool was warm before the window
        assert target.last_client["client_rx_kernel"] == (1.0 if KERNEL_STAMPS else 0.0)
        assert 0 < target.last_client["client_busy"] < 1
        truth = (written - sent) * 1e3
        d = {"client_p99": s["p99_ttft_ms"], "truth_p99": float(np.percentile(truth, 99)),
             "client_p50": s["p50_ttft_ms"], "truth_p50": float(np.percentile(truth, 50)),
             "p99_rx_error_ms": float(np.percentile((first - written) * 1e3, 99)),
             "p99_ingress_ms": float(np.percentile((arrived - sent) * 1e3, 99)),
             "client_error_ms": target.last_client["client_error_ms"]}
        seen.append(d)
        if (d["p99_rx_error_ms"] <= 3.0 and abs(d["client_p99"] - d["truth_p99"]) <= 3.0
                and abs(d["client_p50"] - d["truth_p50"]) <= 3.0):
            return
    pytest.fail(f"P99 TTFT more than 3 ms off the truth in every run: {seen}")


def test_send_stamp_within_1ms_of_the_bytes_landing() -> None:
    """The send side of every latency: against a bare blocking server (tests/load/raw_server.py, which
    stamps a request as the `recv` completing it returns), the client's send stamp is at most 1 ms
    before the request lands at P50, and never after it. A stamp taken at the schedule instead of the
    write, or before the payload is built, fails this. A run a neighbour delayed is repeated (at most 5)."""
    srv = Server("--tokens", "20", script=RAW_SERVER)
    seen: list[dict[str, float]] = []
    try:
        for _ in range(5):
            target = HttpTarget(srv.url, "fake", scrape_metrics=False)
            records = [r for r in target.run(generate(workload(20, 16), n=96, rate=None, seed=0), concurrency=4)
                       if not r.warmup]
            assert all(r.error is None for r in records), {r.error for r in records}
            log = srv.get("/log")
            assert isinstance(log, dict)
            ingress = np.array([log[f"st-{r.id}"] - (target.t0 + r.sent_s) for r in records]) * 1e3
            assert ingress.min() >= -0.05, ingress.min()  # the stamp is taken before the bytes leave
            seen.append({"p50_ingress_ms": float(np.percentile(ingress, 50)), "max_ingress_ms": float(ingress.max())})
            if seen[-1]["p50_ingress_ms"] <= 1.0:
                return
    finally:
        srv.stop()
    pytest.fail(f"send stamps more than 1 ms before the request landed (P50) in every run: {seen}")


def test_ruler_sees_a_stalled_event_loop_and_flags_the_run(fake_server: Callable[..., Any]) -> None:
    """Block the client's event loop for 30 ms every 0.25 s (what a Parquet write or a slow probe on
    the loop would do): the ruler's P99 read lag shows it; with kernel stamps the tokens that piled
    up behind a stall share reads, and their bound shows it; against a 200 ms TTFT SLA (budget 5%,
    10 ms) the run is flagged. Stalls only ever add lag, so the bound holds on a loaded machine."""
    srv = fake_server("--ttft-ms", "5", "--itl-ms", "5")
    reqs = generate(workload(40, 4), n=60, rate=None, seed=0)

    def stall(view: Any) -> None:
        time.sleep(0.03)
        return None

    target = HttpTarget(srv.url, "fake", scrape_metrics=False)
    records = target.run(reqs, concurrency=8, stop=stall)
    summary = summarize(records)
    attach(summary, target.last_client, parse_sla("p99_ttft_ms<=200"))
    assert summary["client_lag_samples"] >= 100
    assert summary["max_client_lag_ms"] >= 25 and summary["client_error_ms"] >= 15, summary
    if KERNEL_STAMPS:  # tokens piled up behind the stall and shared reads: the bound covers them
        assert summary["client_shared_tokens"] > 0.01 and summary["p99_client_rx_bound_ms"] >= 15, summary
    assert summary["client_error_budget_ms"] == pytest.approx(10.0) and summary["client_suspect"] == 1.0
    assert "exceeds 10.00 ms" in (warning(summary) or "")

    # no latency term: no budget, no flag; the error bar is still there
    plain = summarize(records)
    attach(plain, target.last_client, parse_sla("error_rate<=0.1"))
    assert "client_suspect" not in plain and plain["client_error_ms"] == summary["client_error_ms"]


def test_error_bar_from_kernel_stamps_adds_send_gap_read_bound_and_clock() -> None:
    """With every read kernel-stamped the error bar is send gap P99 + the P99 of the shared-read
    bound over all token stamps + the clock map's error; with some user-stamped reads it is never
    below the loop lag; without kernel stamps it is the loop lag."""
    r = Ruler()
    r.gaps[:] = [0.004] * 100  # loop lag 4 ms
    r.send_gaps[:] = [20e-6] * 100
    r.tokens = 1000
    r.shared[:] = [(5, 0.030), (4, 0.010)]  # 9 of 1000 token stamps shared a read: under the P99
    r.kernel_share, r.clock_uncertainty_s, r.clock_drift_s = 1.0, 1e-6, -2e-6
    s = r.summary()
    assert s["p99_client_rx_bound_ms"] == 0.0 and s["client_shared_tokens"] == pytest.approx(0.009)
    assert s["client_clock_error_ms"] == pytest.approx(0.003)
    assert s["client_error_ms"] == pytest.approx(0.020 + 0.003)
    r.shared.append((6, 0.020))  # 15 of 1000: the 10 highest bounds reach into the 20 ms read
    assert r.summary()["p99_client_rx_bound_ms"] == pytest.approx(20.0)
    assert r.summary()["client_error_ms"] == pytest.approx(20.023)
    r.kernel_share = 0.5
    r.shared.clear()
    assert r.summary()["client_error_ms"] == pytest.approx(4.0)
    r.kernel_share = 0.0
    r.gaps[:] = [0.0001] * 100
    assert r.summary()["client_error_ms"] == pytest.approx(0.1)
