"""The scheduler in real time: one asyncio task runs engine steps and hands tokens to streams.

Virtual time maps to wall time as virtual = (perf_counter() - start) x time_scale. Each step's
duration comes from the same cost model as the virtual face; the loop sleeps until the step's end
on the wall clock, then tells every stream how many tokens its request has so far.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from tuner.sim.core import DONE, Core, Seq
from tuner.sim.engine import SimulatedEngine

MAX_BURST = 64  # engine steps run back to back when the loop lags the wall clock


@dataclass
class Stream:
    """What one HTTP request waits on: token counts arrive on `queue`; -1 means finished."""

    seq: Seq
    queue: asyncio.Queue[int] = field(default_factory=asyncio.Queue)
    sent: int = 0
    sent_s: float = 0.0
    first_s: float | None = None


class LiveEngine:
    def __init__(self, engine: SimulatedEngine, time_scale: float = 1.0) -> None:
        self.engine = engine
        self.scale = time_scale
        self.sched: Core = engine.new_scheduler()
        self.streams: dict[int, Stream] = {}
        self.next_idx = 0
        self.start = time.perf_counter()
        self.wake = asyncio.Event()
        self.hung = False
        self.generation_tokens = 0
        self.success = 0
        self.ttfts: list[float] = []  # seconds (virtual), drained by the metrics handler

    def virtual_now(self) -> float:
        return (time.perf_counter() - self.start) * self.scale

    def submit(self, input_len: int, output_len: int) -> Stream:
        """Queue a request now; the caller checked its length against max_model_len."""
        s = Seq(self.next_idx, input_len, output_len, self.virtual_now())
        self.next_idx += 1
        st = Stream(s, sent_s=s.arrival)
        self.streams[s.idx] = st
        # the API server's own latency (tokenising, IPC) before the engine sees the request
        asyncio.get_running_loop().call_later(self.engine.cal.frontend_s / self.scale, self._enqueue, s)
        return st

    def _enqueue(self, s: Seq) -> None:
        if s.state != DONE:  # not aborted meanwhile
            self.sched.waiting.append(s)
            self.wake.set()

    def abort(self, st: Stream) -> None:
        if st.seq.state != DONE:
            self.sched.abort(st.seq)
        self.streams.pop(st.seq.idx, None)

    async def run(self) -> None:
        sched = self.sched
        while True:
            if self.hung or not (sched.waiting or sched.running):
                self.wake.clear()
                await self.wake.wait()
                if self.hung:
                    continue
                sched.now = max(sched.now, self.virtual_now())
                continue
            if not sched.step():
                self.wake.clear()
                await self.wake.wait()
                continue
            # at high time scales one step is shorter than the loop's own overhead: catch up with the
            # wall clock (a bounded burst) before handing out tokens, so virtual time does not fall behind
            burst = 1
            while burst < MAX_BURST and sched.now < self.virtual_now() and sched.step():
                burst += 1
            delay = self.start + sched.now / self.scale - time.perf_counter()
            await asyncio.sleep(max(delay, 0.0))
            self._deliver()

    def _deliver(self) -> None:
        sched = self.sched
        done_ids = []
        for idx, st in self.streams.items():
            s = st.seq
            g = sched.generated(s)
            if g > st.sent:
                if st.first_s is None:
                    st.first_s = self.virtual_now()
                    self.ttfts.append(st.first_s - st.sent_s)
                self.generation_tokens += g - st.sent
                st.queue.put_nowait(g - st.sent)
                st.sent = g
            if s.state == DONE:
                st.queue.put_nowait(-1)
                self.success += 1
                done_ids.append(idx)
        for idx in done_ids:
            del self.streams[idx]
        sched.finished.clear()
