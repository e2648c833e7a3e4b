"""Stop a load point early when its verdict is already known: clearly over the SLA, or saturated.

Two rules, both documented in docs/load.md:
- SLA: more than (1 - q) of the point's requests already exceed a pq latency limit (finished over
  it, or in flight for longer than it): the P-quantile must end above the limit, whatever the rest
  do. Also a running quantile of the finished requests beyond `far` times the limit (after
  `min_samples` of them) stops the point: it is clearly over.
- saturation (open loop only): after the ramp-up (two of the longest streaming times seen), the number of
  requests in flight keeps growing (a linear fit over the last `window_s` seconds rises by more than
  `growth` times what the offered rate could explain by noise) while requests are still being
  sent: the queue grows without bound.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from tuner.load.records import RequestRecord
from tuner.spec.sla import SLATerm

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
    growth: float = 4.0
    _history: list[tuple[float, int]] = field(default_factory=list)

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
        self._history.append((view.now_s, len(view.inflight)))
        # In-flight requests grow for one request lifetime at any load (ramp-up); judge only after two
        # lifetimes, and not at all before any request has finished. A lifetime here is a finished
        # request's streaming time (first token to done), the longest one seen: the first to finish
        # were served by a near-empty batch and stream far shorter than requests under the point's
        # full load (on the H200, 4-8 s against 16 s for 512-token outputs), so a median ended the
        # "ramp-up" while the batch was still filling. Time spent waiting for a first token is left
        # out: under saturation that wait is what grows, and counting it would push the verdict away
        # for ever.
        lifetimes = [r.e2e_s - (r.ttft_s or 0.0) for r in view.completed if r.ok and r.e2e_s is not None]
        if not lifetimes:
            return None
        # Early in a point only requests of the near-empty batch have finished; a request still
        # streaming shows the current pace, so its whole lifetime is projected from its tokens so far
        # (a false verdict at 8 req/s with FP8 on the H200: 2.7 s finished vs ~8 s projected).
        ramp_end = 2.0 * max(float(max(lifetimes)), _projected_lifetime(view.inflight.values()))
        recent = [(t, k) for t, k in self._history if t >= max(view.now_s - self.window_s, ramp_end)]
        if len(recent) < 8 or recent[-1][0] - recent[0][0] < 0.8 * self.window_s:
            return None
        t = np.asarray([p[0] for p in recent])
        k = np.asarray([p[1] for p in recent], dtype=float)
        slope = float(np.polyfit(t, k, 1)[0])
        rise = slope * (t[-1] - t[0])
        if k[-1] >= self.min_inflight and rise > self.growth * math.sqrt(max(k.mean(), 1.0)) and k[-1] > 2 * k[0]:
            return f"saturated: requests in flight grew from {int(k[0])} to {int(k[-1])} in {t[-1] - t[0]:.0f} s"
        return None


def _projected_lifetime(inflight: Iterable[RequestRecord]) -> float:
    """Longest streaming lifetime (first token to done) that the requests in flight are on course for:
    time per streamed chunk so far times the chunks they still owe (a chunk may hold several tokens,
    which only makes the projection longer, so the ramp-up guard errs on the patient side)."""
    longest = 0.0
    for r in inflight:
        n = len(r.token_times)
        if n >= 2 and r.output_len > 1:
            longest = max(longest, (r.token_times[-1] - r.token_times[0]) / (n - 1) * (r.output_len - 1))
    return longest


def _value(r: RequestRecord, metric: str) -> float | None:
    if not r.ok:
        return None
    return r.ttft_s if metric == "ttft" else r.e2e_s


def _still_over(r: RequestRecord, metric: str, limit_s: float, now_s: float) -> bool:
    """An unfinished request already past the limit will end over it."""
    if metric == "ttft":  # token_times fill live while a stream runs; first_token_s only at its end
        return r.first_token_s is None and not r.token_times and now_s - r.sent_s > limit_s
    return now_s - r.sent_s > limit_s
