"""The sim engine's server face through Engine.server: flavour-named metrics and read-back config."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuner.engines import get_engine
from tuner.engines.base import LaunchSpec
from tuner.engines.process import http_get, reserve_port
from tuner.spec.study import ModelSpec, SimSettings

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("flavour", ["vllm", "sglang"])
def test_sim_server_speaks_its_flavour(tmp_path: Path, flavour: str) -> None:
    engine = get_engine("sim")
    port, sock = reserve_port()
    knob = {"max_num_seqs": 48} if flavour == "vllm" else {"max_running_requests": 48}
    launch = LaunchSpec(model=ModelSpec(name="Qwen/Qwen3-8B", served_name="q8", max_model_len=4096),
                        host="127.0.0.1", port=port, log_path=tmp_path / "sim.log",
                        settings=SimSettings(flavour=flavour, mode="server", time_scale=50), port_socket=sock)
    engine.check_args(knob, launch)
    with engine.server(knob, launch) as srv:
        assert srv.start_seconds > 0
        prefix = engine.metrics_prefix_for(launch)
        assert prefix == f"{flavour}:" and engine.metrics_prefix == prefix
        status, body = http_get(srv.base_url + "/metrics", 10)
        assert status == 200 and prefix in body.decode()
        status, body = http_get(srv.base_url + "/v1/models", 10)
        assert b'"q8"' in body
        resolved = engine.resolved_config(srv.base_url)
        assert resolved, "sim /server_info answered nothing"
        assert resolved["flavour"] == flavour
        assert all(resolved[k] == v for k, v in knob.items())  # the knob the trial set is what it runs with
        assert srv.failure() is None
    assert not srv.alive()


def test_a_time_scaled_server_is_measured_on_its_own_clock(tmp_path: Path) -> None:
    """A study on the server face at time_scale 5: the trial's client must send at arrival / 5 and read times x 5,
    so it measures what the virtual face predicts, in a fifth of the wall time. Before, it sent at the wall rate
    and read wall times: TPOT came out ~5x too low (1.1 ms against 6.0) and no point ran faster."""
    import time

    import numpy as np

    from tuner.load.records import Request, RequestRecord
    from tuner.load.target import HttpTarget
    from tuner.sim import SimulatedEngine

    scale = 5.0
    rng = np.random.default_rng(0)
    arrivals = np.cumsum(rng.exponential(1 / 4.0, 80))
    reqs = [Request(i, float(arrivals[i]), 1000, 128) for i in range(80)]

    def figures(recs: list[RequestRecord]) -> tuple[float, float]:
        ok = [r for r in recs if r.ok]
        assert len(ok) == len(reqs)
        span = max(r.done_s for r in ok) - min(r.sent_s for r in ok)  # type: ignore[type-var]
        return sum(r.output_tokens for r in ok) / span, float(np.median([r.tpot_s for r in ok]))

    virtual = figures(SimulatedEngine(flavour="vllm", gpu="H200", shape="qwen3-8b", args={},
                                      max_model_len=4096).run(reqs))
    engine = get_engine("sim")
    port, sock = reserve_port()
    launch = LaunchSpec(model=ModelSpec(name="Qwen/Qwen3-8B", served_name="q8", max_model_len=4096),
                        host="127.0.0.1", port=port, log_path=tmp_path / "sim.log",
                        settings=SimSettings(flavour="vllm", mode="server", time_scale=scale), port_socket=sock)
    with engine.server({}, launch) as srv:
        began = time.monotonic()
        served = figures(HttpTarget(srv.base_url, "q8", time_scale=scale, scrape_metrics=False).run(reqs))
        wall = time.monotonic() - began
    assert served[0] == pytest.approx(virtual[0], rel=0.05), (served, virtual)  # output tok/s
    assert served[1] == pytest.approx(virtual[1], rel=0.10), (served, virtual)  # median TPOT
    assert wall < 0.5 * arrivals[-1], f"{wall:.1f} s of wall time for {arrivals[-1]:.1f} s of arrivals"


@pytest.mark.parametrize("flavour", ["vllm", "sglang"])
def test_the_server_face_reads_the_tails_the_virtual_face_predicts(tmp_path: Path, flavour: str) -> None:
    """Latency tails, not only medians: the same Poisson sends through the server face (x2) and the virtual face.
    The live loop shares the virtual face's arrival path (the API server's FIFO, the one-step-ahead gate) and
    hands tokens out at each step's output time (a prompt step's launch holds the step before). Before, it
    handed them out at each step's GPU end after a fixed latency: on this load (vLLM) P50 / P99 TTFT read -76 /
    -78 %, P99 ITL -82 %, P50 TPOT -26 % (benchmarks/server_face_tails.py).

    The launch times are drawn (cv 0.27), and the server face draws them in real time, so it is one more draw of
    the model: its figures must fall in the range of the virtual face's over 12 jitter seeds (P99 TTFT of 150
    requests spans 74-121 ms there), widened by 20 % and, for latencies, by the HTTP path's own cost: a few ms of
    wall time per request on a busy 2-core machine (x the time scale), which one slow request puts into a P99."""
    import dataclasses

    import numpy as np

    from tuner.load.records import Request
    from tuner.load.target import HttpTarget
    from tuner.sim import SimulatedEngine
    from tuner.sim.calibration import FITTED
    from tuner.sim.reference import figures

    scale, rate, n = 2.0, 12.0, 150
    rng = np.random.default_rng(0)
    arrivals = np.cumsum(rng.exponential(1 / rate, n))
    reqs = [Request(i, float(arrivals[i]), 1000, 128) for i in range(n)]
    keys = ("output_throughput", "p50_ttft_ms", "p99_ttft_ms", "p50_tpot_ms", "p99_itl_ms")
    draws = [figures(SimulatedEngine(flavour=flavour, gpu="H200", shape="qwen3-1.7b", args={}, max_model_len=4096,
                                     calibration=dataclasses.replace(FITTED, jitter_seed=seed)).run(reqs))
             for seed in range(12)]
    engine = get_engine("sim")
    port, sock = reserve_port()
    launch = LaunchSpec(model=ModelSpec(name="Qwen/Qwen3-1.7B", served_name="q", max_model_len=4096),
                        host="127.0.0.1", port=port, log_path=tmp_path / "sim.log",
                        settings=SimSettings(flavour=flavour, gpu="H200", mode="server", time_scale=scale),
                        port_socket=sock)
    with engine.server({}, launch) as srv:
        recs = HttpTarget(srv.base_url, "q", time_scale=scale, scrape_metrics=False).run(reqs)
    assert all(r.ok for r in recs)
    served = figures(recs)
    http_ms = 3.0 * scale
    for key in keys:
        lo, hi = min(d[key] for d in draws), max(d[key] for d in draws)
        slack = http_ms if key.endswith("_ms") else 0.0
        assert 0.8 * lo - slack <= served[key] <= 1.2 * hi + slack, (key, served[key], lo, hi)
