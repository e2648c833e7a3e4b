"""Early-stop rules on hand-made live views: each rule fires when its verdict is certain, not before."""

from __future__ import annotations

from tuner.load.earlystop import EarlyStop, LiveView
from tuner.load.records import RequestRecord
from tuner.spec.sla import parse_sla


def done(i: int, ttft: float, cls: str = "a") -> RequestRecord:
    return RequestRecord(id=i, cls=cls, input_len=1, output_len=2, sent_s=0.0, first_token_s=ttft,
                         done_s=ttft + 0.01, token_times=[ttft, ttft + 0.01], output_tokens=2)


def waiting(i: int, sent: float, cls: str = "a") -> RequestRecord:
    return RequestRecord(id=i, cls=cls, input_len=1, output_len=2, sent_s=sent)


SLA = parse_sla("p99_ttft_ms<=100")


def test_sla_rule_needs_more_than_one_percent_certainly_over() -> None:
    stop = EarlyStop(sla=SLA, total=200, open_loop=False)
    fast = [done(i, 0.05) for i in range(10)]
    late = {100 + i: waiting(100 + i, 0.0) for i in range(3)}  # in flight 0.5 s without a first token
    assert stop(LiveView(0.5, dict(list(late.items())[:2]), fast, 12, 200)) is None  # 2 of 200 may be over
    reason = stop(LiveView(0.5, late, fast, 13, 200))
    assert reason is not None and reason.startswith("sla: 3 of 200")


def test_running_quantile_far_over_the_limit() -> None:
    stop = EarlyStop(sla=SLA, total=100_000, open_loop=False)
    slow = [done(i, 0.2) for i in range(49)]
    assert stop(LiveView(1.0, {}, slow, 49, 100_000)) is None  # fewer than 50 finished
    assert stop(LiveView(1.0, {}, [*slow, done(99, 0.2)], 50, 100_000)) is None  # 2x, not 3x
    over = [done(i, 0.35) for i in range(50)]
    assert (stop(LiveView(1.0, {}, over, 50, 100_000)) or "").startswith("sla: running p99_ttft_ms")


def test_abnormal_classes_are_not_judged() -> None:
    stop = EarlyStop(sla=SLA, total=100, open_loop=False, ignore=frozenset({"abnormal"}))
    long = {i: waiting(i, 0.0, cls="abnormal") for i in range(10)}
    assert stop(LiveView(5.0, long, [done(99, 0.9, cls="abnormal")], 11, 110)) is None


def test_saturation_needs_a_growing_queue_while_sending() -> None:
    grow = EarlyStop(sla=(), total=10_000, open_loop=True, window_s=4.0, min_inflight=16)
    flat = EarlyStop(sla=(), total=10_000, open_loop=True, window_s=4.0, min_inflight=16)
    finished = [done(i, 0.05) for i in range(5)]  # requests live ~0.06 s: ramp-up is long over
    reason = None
    for k in range(40):
        t = k * 0.25
        assert flat(LiveView(t, {i: waiting(i, t) for i in range(40)}, finished, 100 + k, 10_000)) is None
        reason = reason or grow(LiveView(t, {i: waiting(i, t) for i in range(4 + 3 * k)}, finished, 100 + k,
                                         10_000))
    assert reason is not None and reason.startswith("saturated")


def test_no_saturation_verdict_during_ramp_up() -> None:
    """Long streams (5 s each, as on the H200) fill the queue for one lifetime at any load: not a verdict."""
    stop = EarlyStop(sla=(), total=10_000, open_loop=True, window_s=4.0, min_inflight=16)
    for k in range(40):
        t = k * 0.25  # 10 s, in flight grows the whole time, nothing has finished yet
        assert stop(LiveView(t, {i: waiting(i, t) for i in range(4 + 3 * k)}, [], 100 + k, 10_000)) is None
    slow = [RequestRecord(id=i, cls="a", input_len=1, output_len=2, sent_s=0.0, first_token_s=0.1, done_s=6.0,
                          token_times=[0.1, 6.0], output_tokens=2) for i in range(5)]
    assert stop(LiveView(11.0, {i: waiting(i, 11.0) for i in range(130)}, slow, 144, 10_000)) is None


def test_ramp_up_is_judged_by_the_longest_finished_lifetime() -> None:
    """As on the H200 (static 2048/512 at 8 req/s): the first requests to finish were served by a
    near-empty batch and lived 3-4 s, those sent once the batch had filled 12-16 s, and in flight still
    doubles over 10 s at a load the server sustains. Two median lifetimes (7 s) would call that
    saturation (the false verdict seen on the device); two of the longest (28 s) wait it out."""
    stop = EarlyStop(sla=(), total=10_000, open_loop=True)
    lived = [RequestRecord(id=i, cls="a", input_len=1, output_len=2, sent_s=0.0, first_token_s=0.1, done_s=e2e,
                           token_times=[0.1, e2e], output_tokens=2) for i, e2e in enumerate([3, 3, 3, 4, 12, 14])]
    for k in range(49):
        t = 8.0 + k * 0.25  # 8 s .. 20 s: 40 -> 100 in flight
        assert stop(LiveView(t, {i: waiting(i, t) for i in range(40 + 5 * k // 4)}, lived, 100 + k, 10_000)) is None
    reason = None
    for k in range(60):
        t = 28.0 + k * 0.25  # past two of the longest lifetimes, and still doubling: a verdict
        reason = reason or stop(LiveView(t, {i: waiting(i, t) for i in range(100 + 4 * k)}, lived, 200 + k, 10_000))
    assert reason is not None and reason.startswith("saturated")


def test_streaming_requests_are_not_waiting_for_a_first_token() -> None:
    stop = EarlyStop(sla=SLA, total=200, open_loop=False)
    streaming = {i: RequestRecord(id=i, cls="a", input_len=1, output_len=99, sent_s=0.0, token_times=[0.05])
                 for i in range(10)}  # in flight 0.5 s, first token seen live at 50 ms
    assert stop(LiveView(0.5, streaming, [], 10, 200)) is None
    closed = EarlyStop(sla=(), total=10_000, open_loop=False, window_s=4.0, min_inflight=16)
    assert all(closed(LiveView(k * 0.25, {i: waiting(i, 0) for i in range(4 + 3 * k)}, [], 100, 10_000)) is None
               for k in range(40))


def streaming(i: int, first: float, now: float, per_token: float, output_len: int = 512) -> RequestRecord:
    """A request in flight that has streamed since `first` at `per_token` seconds a token."""
    n = max(2, int((now - first) / per_token) + 1)
    return RequestRecord(id=i, cls="a", input_len=1, output_len=output_len, sent_s=first - 0.1,
                         token_times=[first + k * per_token for k in range(n)])


def test_ramp_up_waits_for_the_lifetime_the_streams_in_flight_are_on_course_for() -> None:
    """FP8 on the H200 (static 2048/512 at 8 req/s): the first requests finished in 2.7 s on a
    near-empty batch, while those streaming in a full batch pace 15 ms a token (~7.7 s for 512).
    In flight grew 43 -> 87 in 9 s at a load the server sustained; the finished lifetimes alone
    called that saturation. A queue still growing past the projected lifetimes is a verdict."""
    stop = EarlyStop(sla=(), total=10_000, open_loop=True)
    lived = [RequestRecord(id=1000 + i, cls="a", input_len=1, output_len=512, sent_s=0.0, first_token_s=0.1,
                           done_s=2.8, token_times=[0.1, 2.8], output_tokens=512) for i in range(3)]
    for k in range(40):
        t = 5.0 + k * 0.25  # 5 s .. 15 s: 40 -> 120 in flight, streams pacing 15 ms a token
        flight = {i: streaming(i, max(0.2, t - 6.0), t, 0.015) for i in range(40 + 2 * k)}
        assert stop(LiveView(t, flight, lived, 100 + k, 10_000)) is None
    reason = None
    for k in range(60):
        t = 20.0 + k * 0.25  # past two projected lifetimes (~15.4 s), and still doubling
        flight = {i: streaming(i, t - 6.0, t, 0.015) for i in range(120 + 4 * k)}
        reason = reason or stop(LiveView(t, flight, lived, 200 + k, 10_000))
    assert reason is not None and reason.startswith("saturated")
