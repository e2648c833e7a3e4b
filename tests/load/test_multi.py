"""One run split over two client processes: every request once, on one clock, arrivals on schedule."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tuner.engines import get_engine
from tuner.load.http1 import KERNEL_STAMPS
from tuner.load.metrics import summarize
from tuner.load.target import HttpTarget
from tuner.load.workload import generate
from tuner.spec.load import validate
from tuner.spec.workload import Workload


def test_two_processes_share_one_window(fake_server: Callable[..., Any]) -> None:
    srv = fake_server("--ttft-ms", "30", "--itl-ms", "5")
    w = validate(Workload, {"classes": [{"name": "a", "weight": 1, "input": {"dist": "fixed", "value": 16},
                                         "output": {"dist": "fixed", "value": 10}}],
                            "warmup_requests": 4, "arrivals": {"process": "constant"}}, "t")
    reqs = generate(w, n=40, rate=40.0, seed=0)  # one request every 25 ms, alternating between processes
    target = HttpTarget(srv.url, "fake", processes=2, metric_names=get_engine("vllm").metric_names)
    records = target.run(reqs)
    assert sorted(r.id for r in records) == sorted(r.id for r in reqs) and all(r.ok for r in records)
    measured = {r.id: r for r in records if not r.warmup}
    late = np.array([measured[q.id].sent_s - q.arrival_s for q in reqs if not q.warmup])
    # both processes start their windows at one instant: each request goes out on its own schedule. A few
    # requests of the second process read 20-75 us early on the 2-vCPU VM of 2026-12-01 (in 3 of 5 runs;
    # the same at dc795e7; not explained: one process's clock reads never went backwards there); what this
    # guards against is a window started a schedule slot (25 ms) apart, so early by up to 1 ms is allowed
    assert late.min() > -0.001 and float(np.median(late)) < 0.005, late
    s = summarize(records)
    assert s["completed"] == 40 and s["p50_ttft_ms"] >= 30 - 0.05
    c = target.last_client
    assert c["client_lag_samples"] > 0 and c["p50_client_lag_ms"] >= 0 and c["client_error_ms"] >= 0
    assert c["client_rx_kernel"] == (1.0 if KERNEL_STAMPS else 0.0)  # the worst process's share
    assert any(p["kind"] == "metrics" for p in target.last_probes)  # the first process scraped /metrics

    closed = HttpTarget(srv.url, "fake", processes=2).run(generate(w, n=24, rate=None, seed=1), concurrency=4)
    assert len(closed) == 28 and all(r.ok for r in closed)
