"""Stop a load point early when its verdict is already known: clearly over the SLA, or saturated.

Two rules, both documented in docs/load.md:
- SLA: more than (1 - q) of the point's requests already exceed a pq latency limit (finished over
  it, or in flight for longer than it): the P-quantile must end above the limit, whatever the rest
  do. Also a running quantile of the finished requests beyond `far` times the limit (after
  `min_samples` of them) stops the point: it is clearly over.
- saturation (open loop only): while requests are still being sent, a backlog builds: requests still in
  flight past what their send time and the observed latencies predict (no first token after
  `ttft_slack` typical TTFTs; a stream past its TTFT plus its output at the streams' pace, times
  `slack`) number at least `min_backlog` and `backlog_share` of those in flight, and most of them piled
  up within the last `window_s` seconds. In-flight growth that arrivals and lifetimes explain (a
  ramp-up, a Poisson burst) is no verdict.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from tuner.load.records import RequestRecord
from tuner.spec.sla import SLATerm

_TTFT_FLOOR_S = 0.5  # ... and at least this long past one (event-loop and network jitter)
_FIRST_TOKENS = 16  # how many of the point's first first-tokens give the typical TTFT
_PACE_WINDOW_S = 2.0  # the streams' current pace: their chunks over the last seconds
_QUANTILE = {"median": 0.5, "p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99, "p99.9": 0.999, "max": 1.0}


@dataclass
class LiveView:
    """What a check sees during a run (times in seconds on the run's clock)."""

    now_s: float
    inflight: Mapping[int, RequestRecord]
    completed: Sequence[RequestRecord]  # measured requests only
    sent: int
    total: int


@dataclass
class EarlyStop:
    sla: Sequence[SLATerm]
    total: int  # measured requests planned for the point (abnormal ones not counted)
    open_loop: bool
    ignore: frozenset[str] = frozenset()  # abnormal classes: not judged against the SLA
    far: float = 3.0
    min_samples: int = 50
    window_s: float = 10.0
    min_inflight: int = 32
    min_backlog: int = 8  # overdue requests (past their predicted lifetime) before a verdict
    backlog_share: float = 0.2  # ... and at least this share of the requests in flight
    slack: float = 1.25  # a stream is overdue past slack x its predicted lifetime
    ttft_slack: float = 4.0  # a request without a first token, past this many typical TTFTs
    _history: list[tuple[float, int, int]] = field(default_factory=list)

    def __call__(self, view: LiveView) -> str | None:
        return self._sla(view) or (self._saturated(view) if self.open_loop else None)

    def _sla(self, view: LiveView) -> str | None:
        for term in self.sla:
            stat, metric = term.latency or ("", "")
            q = _QUANTILE.get(stat)
            if q is None or metric not in ("ttft", "e2el"):
                continue  # tpot/itl/mean terms need finished requests; left to the final summary
            limit_s = term.limit / 1000.0
            values = [_value(r, metric) for r in view.completed if r.cls not in self.ignore]
            done = [v for v in values if v is not None]
            over = sum(v > limit_s for v in done)
            over += sum(1 for r in view.inflight.values()
                        if r.cls not in self.ignore and _still_over(r, metric, limit_s, view.now_s))
            allowed = math.floor((1.0 - q) * self.total) if q < 1.0 else 0
            if over > allowed:
                return f"sla: {over} of {self.total} requests already over {term} (the {stat} cannot meet it)"
            if len(done) >= self.min_samples and q < 1.0:
                est = float(np.quantile(done, q)) * 1000.0
                if est > self.far * term.limit:
                    return f"sla: running {term.name} = {est:.0f} ms, over {self.far:g}x the limit {term.limit:g}"
        return None

    def _saturated(self, view: LiveView) -> str | None:
        if view.sent >= view.total:
            return None  # sending is over; draining is not a growing queue
        # Raw growth of the in-flight count is no verdict: at a load the server sustains it grows for a
        # whole lifetime (512-token streams live ~10 s on the H200) and swings with Poisson bursts (43 ->
        # 87 in 9 s at 8 req/s, a false verdict on the device). What arrivals and lifetimes cannot explain
        # is a request still in flight past the lifetime it should have had: the observed time to first
        # token plus its output at the pace the streams now keep. Only a growing number of those (a
        # backlog) is saturation.
        life = _lifetime_model(view)
        if life is None:
            return None  # nothing finished yet: no observed lifetime to compare with
        ttft_s, pace_s = life
        overdue = sum(1 for r in view.inflight.values() if self._overdue(r, view.now_s, ttft_s, pace_s))
        self._history.append((view.now_s, len(view.inflight), overdue))
        recent = [h for h in self._history if h[0] >= view.now_s - self.window_s]
        if len(recent) < 8 or recent[-1][0] - recent[0][0] < 0.8 * self.window_s:
            return None
        t = np.asarray([h[0] for h in recent])
        b = np.asarray([h[2] for h in recent], dtype=float)
        rise = float(np.polyfit(t, b, 1)[0]) * (t[-1] - t[0])
        k_end, b_end = recent[-1][1], b[-1]
        if (k_end >= self.min_inflight and b_end >= max(self.min_backlog, self.backlog_share * k_end)
                and rise >= 0.5 * b_end):
            return (f"saturated: {int(b_end)} of {k_end} requests in flight are past the lifetime arrivals and "
                    f"observed latencies predict ({ttft_s * 1000:.0f} ms to first token, {pace_s * 1000:.1f} ms a "
                    f"token), up from {int(b[0])} in {t[-1] - t[0]:.0f} s")
        return None

    def _overdue(self, r: RequestRecord, now_s: float, ttft_s: float, pace_s: float) -> bool:
        """Still in flight past what the observed latencies predict for it: a request without a first
        token, past a few typical TTFTs (a waiting line); a stream, past its TTFT plus its output at the
        slower of the current pace and its own (a stalled or preempted stream)."""
        age = now_s - r.sent_s
        if not r.token_times:
            return age > max(self.ttft_slack * ttft_s, ttft_s + _TTFT_FLOOR_S)
        return age > self.slack * (ttft_s + max(r.output_len - 1, 0) * max(pace_s, _own_pace(r)))


def _lifetime_model(view: LiveView) -> tuple[float, float] | None:
    """(time to first token, seconds per streamed chunk) that a request sent now should see when the
    server keeps up: the median TTFT of the point's first first-tokens (a TTFT taken later would grow
    with a waiting line and hide it), and
    the pace the streams in flight keep over their last seconds (falling back to finished TPOT)."""
    done = [r for r in view.completed if r.ok and r.first_token_s is not None]
    firsts = [(r.first_token_s, r.first_token_s - r.sent_s) for r in done if r.first_token_s is not None]
    firsts += [(r.token_times[0], r.token_times[0] - r.sent_s) for r in view.inflight.values() if r.token_times]
    if not done and len(firsts) < _FIRST_TOKENS:
        return None  # too few first tokens seen to know what a first token takes
    ttft = float(np.median([w for _, w in sorted(firsts)[:_FIRST_TOKENS]]))
    paces = []
    for r in view.inflight.values():
        recent = [x for x in r.token_times if x >= view.now_s - _PACE_WINDOW_S]
        if len(recent) >= 2:
            paces.append((recent[-1] - recent[0]) / (len(recent) - 1))
    if paces:
        return ttft, float(np.median(paces))
    tpots = [r.tpot_s for r in done if r.tpot_s is not None]
    return (ttft, float(np.median(tpots))) if tpots else (ttft, 0.0)


def _own_pace(r: RequestRecord) -> float:
    """A stream's own average pace so far: after a burst the batch shrinks and the pace now is faster
    than the one an older stream lived through; its lifetime is judged by the slower of the two."""
    n = len(r.token_times)
    return (r.token_times[-1] - r.token_times[0]) / (n - 1) if n >= 2 else 0.0


def _value(r: RequestRecord, metric: str) -> float | None:
    if not r.ok:
        return None
    return r.ttft_s if metric == "ttft" else r.e2e_s


def _still_over(r: RequestRecord, metric: str, limit_s: float, now_s: float) -> bool:
    """An unfinished request already past the limit will end over it."""
    if metric == "ttft":  # token_times fill live while a stream runs; first_token_s only at its end
        return r.first_token_s is None and not r.token_times and now_s - r.sent_s > limit_s
    return now_s - r.sent_s > limit_s
