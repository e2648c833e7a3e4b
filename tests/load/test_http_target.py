"""The streaming client against a real local server with known, injected delays."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from tuner.engines import get_engine
from tuner.load.earlystop import EarlyStop
from tuner.load.metrics import summarize
from tuner.load.target import HttpTarget
from tuner.load.workload import generate
from tuner.spec.load import validate
from tuner.spec.sla import parse_sla
from tuner.spec.workload import Workload


def fixed(inp: int, out: int, warmup: int = 0, **extra: Any) -> Workload:
    cls = {"name": "a", "weight": 1, "input": {"dist": "fixed", "value": inp},
           "output": {"dist": "fixed", "value": out}, **extra}
    return validate(Workload, {"classes": [cls], "warmup_requests": warmup}, "test")


def test_timings_match_injected_delays_within_1ms(fake_server: Callable[..., Any], realtime: Any) -> None:
    """Moderate load (32 req/s of 250 ms: ~8 streams, 640 tokens/s): every chunk's receive time is within
    1 ms of the server's write at P99 (the client's own timing error), and the client's P99 TTFT and ITL
    are within 1 ms of the same percentiles of what the server really did (its write times, from the
    client's send), its P99 E2E within 3 ms (the server writes the usage and [DONE] chunks after the last token:
    1.4-1.6 ms on an idle machine).

    The server's own lateness against the injected 50/10 ms is not the client's error: a CI run read
    P99 TTFT/ITL 1.7-2.9 ms over the injected delays while the receive-after-write error was 0.15 ms,
    so the injected delays are only a sanity check on the server (P50 within 5 ms). Other processes
    share this machine's two cores: client and server run under SCHED_FIFO where permitted, and a run
    hit by a stall is repeated (at most 5). A systematic error fails every run.
    """
    srv = fake_server("--ttft-ms", "50", "--itl-ms", "10", "--realtime")
    w = validate(Workload, {"classes": [{"name": "a", "weight": 1, "input": {"dist": "fixed", "value": 64},
                                         "output": {"dist": "fixed", "value": 20}}],
                            "warmup_requests": 4, "arrivals": {"process": "constant"}}, "test")
    reqs = generate(w, n=64, rate=32.0, seed=0)
    errors: list[dict[str, float]] = []
    for _ in range(5):
        target = HttpTarget(srv.url, "fake", scrape_metrics=False)
        with realtime():
            records = target.run(reqs)
        s = summarize(records)
        assert s["completed"] == 64 and s["failed"] == 0
        sent = srv.get("/timings")
        measured = [r for r in records if not r.warmup]
        writes = {r.id: sent[f"st-{r.id}"][-20:] for r in measured}  # the last attempt's writes
        gaps = [target.t0 + t - wrote for r in measured for t, wrote in zip(r.token_times, writes[r.id], strict=True)]
        truth_ttft = [writes[r.id][0] - (target.t0 + r.sent_s) for r in measured]
        truth_itl = [b - a for r in measured for a, b in zip(writes[r.id], writes[r.id][1:], strict=False)]
        truth_e2e = [writes[r.id][-1] - (target.t0 + r.sent_s) for r in measured]
        p99 = lambda xs: float(np.percentile(xs, 99)) * 1e3  # noqa: E731
        err = {"ttft": s["p99_ttft_ms"] - p99(truth_ttft), "itl": s["p99_itl_ms"] - p99(truth_itl),
               "e2e": s["p99_e2el_ms"] - p99(truth_e2e), "recv_after_write": p99(gaps),
               "server_late_ttft": p99(truth_ttft) - 50}
        errors.append(err)
        # measured can only be later than what the server did (client work adds, never subtracts)
        assert min(gaps) > 0 and err["ttft"] > -0.05 and err["e2e"] > -0.05, err
        assert abs(float(np.median(truth_ttft)) * 1e3 - 50) < 5, err  # the server keeps its injected delays
        if err["recv_after_write"] < 1.0 and abs(err["ttft"]) < 1.0 and abs(err["itl"]) < 1.0 and err["e2e"] < 3.0:
            return
    pytest.fail(f"P99 timing error over the bound in every run: {errors}")


def test_request_body_usage_and_prefixes(fake_server: Callable[..., Any]) -> None:
    srv = fake_server("--ttft-ms", "1", "--itl-ms", "1")
    w = fixed(120, 7, warmup=2, shared_prefix={"length": 100, "groups": 2})
    reqs = generate(w, n=20, rate=None, seed=1)
    records = HttpTarget(srv.url, "fake").run(reqs, concurrency=4)
    assert len(records) == 22 and all(r.ok for r in records) and sum(r.warmup for r in records) == 2
    assert all(r.output_tokens == 7 and len(r.token_times) == 7 for r in records)
    log = {e["rid"]: e for e in srv.get("/log")}
    assert all(e["prompt_tokens"] == 120 and e["max_tokens"] == 7 for e in log.values())
    assert all(e["ignore_eos"] and e["stream"] and e["include_usage"] for e in log.values())
    heads: dict[int, set[str]] = {}
    for r in reqs:
        heads.setdefault(r.prefix_group, set()).add(" ".join(log[f"st-{r.id}"]["head"]))
    assert sorted(len(h) for h in heads.values()) == [1, 1]  # one shared head per group
    assert heads[0] != heads[1]


def test_chat_and_token_id_prompts(fake_server: Callable[..., Any]) -> None:
    srv = fake_server("--ttft-ms", "1", "--itl-ms", "1")
    reqs = generate(fixed(33, 5), n=6, rate=None, seed=2)
    chat = HttpTarget(srv.url + "/v1", "fake", api="chat").run(reqs)
    assert all(r.ok and len(r.token_times) == 5 for r in chat)
    ids = HttpTarget(srv.url, "fake", prompt_mode="token_ids").run(reqs)
    assert all(r.ok for r in ids)
    assert all(e["prompt_tokens"] == 33 for e in srv.get("/log"))
    assert any(isinstance(e["head"][0], int) for e in srv.get("/log"))


def test_failures_are_recorded_as_data(fake_server: Callable[..., Any]) -> None:
    reqs = generate(fixed(8, 10), n=9, rate=None, seed=0)
    srv = fake_server("--ttft-ms", "1", "--itl-ms", "1", "--fail-every", "3")
    records = HttpTarget(srv.url, "fake").run(reqs, concurrency=1)
    assert [r.error is not None for r in records] == [False, False, True] * 3
    assert all(r.error.startswith("http 500") for r in records if r.error)
    s = summarize(records)
    assert s["error_rate"] == pytest.approx(1 / 3) and s["completed"] == 6

    dropped = HttpTarget(fake_server("--drop-after", "4").url, "fake").run(reqs[:2])
    assert all(r.error and len(r.token_times) == 4 for r in dropped)

    slow = fake_server("--ttft-ms", "3000")
    timed_out = HttpTarget(slow.url, "fake", timeout_s=0.3).run(reqs[:2])
    assert all(r.error and r.error.startswith("timeout") for r in timed_out)

    refused = HttpTarget("http://127.0.0.1:9", "fake").run(reqs[:2])
    assert all(r.error and "Connect" in r.error for r in refused)


def test_open_loop_sends_on_schedule_and_probes(fake_server: Callable[..., Any]) -> None:
    srv = fake_server("--ttft-ms", "5", "--itl-ms", "5")
    w = validate(Workload, {"profile": "static", "warmup_requests": 0, "arrivals": {"process": "constant"}}, "t")
    # 40 tokens at 5 ms: each request lives ~205 ms, two arrival gaps, so a /metrics probe always finds
    # one running. With 20 tokens (105 ms) the 1 s probe, in phase with the 0.1 s arrivals, could land
    # in the 5 ms overlap's gap every time and read 0 (seen once in CI).
    reqs = [r.__class__(**{**{k: getattr(r, k) for k in r.__slots__}, "output_len": 40}) for r in
            generate(w, n=25, rate=10.0, seed=0)]
    target = HttpTarget(srv.url, "fake", metric_names=get_engine("vllm").metric_names)  # the fake speaks vLLM's
    records = target.run(reqs)
    late = [r.sent_s - q.arrival_s for r, q in zip(records, reqs, strict=True)]
    # never early; late only by the client's own work (a new connection, a busy machine)
    assert min(late) >= 0 and float(np.median(late)) < 0.005 and max(late) < 0.1, late
    running = [p["running"] for p in target.last_probes if p["kind"] == "metrics"]
    assert len(running) >= 2 and max(running) >= 1


@pytest.mark.parametrize("wait_s", [0.0002, 0.0015, 0.004])
def test_sleep_until_never_wakes_early_under_uvloop(wait_s: float) -> None:
    """uvloop hands a wait shorter than its 1 ms tick back on the next loop turn: a sender that gave up after a
    count of turns went out early (CI: a request 0.17 ms before its arrival time)."""
    uvloop = pytest.importorskip("uvloop")
    from tuner.load.target import _sleep_until

    async def main() -> float:
        worst = math.inf
        for _ in range(40):
            deadline = time.perf_counter() + wait_s
            await _sleep_until(deadline)
            worst = min(worst, time.perf_counter() - deadline)
        return worst

    assert uvloop.run(main()) >= 0


def test_early_stop_on_a_saturated_server(fake_server: Callable[..., Any]) -> None:
    srv = fake_server("--ttft-ms", "10", "--itl-ms", "5", "--max-running", "2")
    reqs = generate(fixed(8, 10), n=600, rate=60.0, seed=0)  # ~3x what 2 slots of ~55 ms can serve
    target = HttpTarget(srv.url, "fake")
    t = time.perf_counter()
    records = target.run(reqs, stop=EarlyStop(sla=parse_sla("p99_ttft_ms<=300"), total=600, open_loop=True))
    assert target.stopped_early and target.stopped_early.startswith("sla")
    assert time.perf_counter() - t < 5  # the full run would take 10 s of sending alone
    assert any(r.error and r.error.startswith("cancelled") for r in records) and len(records) < 600

    target.run(reqs[:300], stop=EarlyStop(sla=(), total=300, open_loop=True, window_s=2.0, min_inflight=16))
    assert target.stopped_early and target.stopped_early.startswith("saturated")


def test_send_until_drains_in_flight(fake_server: Callable[..., Any]) -> None:
    srv = fake_server("--ttft-ms", "10", "--itl-ms", "5")
    reqs = generate(fixed(8, 10), n=1000, rate=None, seed=0)
    records = HttpTarget(srv.url, "fake").run(reqs, concurrency=4, send_until_s=0.5)
    assert 10 < len(records) < 100 and all(r.ok for r in records)
