"""The scheduler in real time: one asyncio task runs engine steps, timers hand tokens to streams.

Virtual time maps to wall time as virtual = (perf_counter() - start) x time_scale. Each step's duration and
output time come from the same scheduler and cost model as the virtual face (tuner/sim/engine.py, `_run_once`),
and a request travels the same path there:
- the API server takes it in: `ingress_per_seq_s` per running sequence (stretched by that server's busy share,
  `ingress_rho_max`), then one request at a time through its FIFO (`ingress_s`, `ingress_tok_s`, `ingress_cv`);
- async scheduling (`sched_ahead`, SGLang's overlap): a request that reaches the engine while a step runs waits
  for the step after the next; with `prompt_hold` the scheduler is told of it (`incoming`), so the step before a
  prompt step hands its tokens out when that prompt step's launch ends;
- every step's tokens reach their streams at the step's output time (its GPU end, or later when held, plus
  `frontend_s`), not when the next step starts;
- with `sched_after_launch` 2 a step whose launch is still running is computed once that launch is over, so the
  scheduler sees the requests that came in meanwhile (`t_next`), as the virtual face does.
Not modelled here: the multi-pass API-server streaming terms (`stream_tok_s`, `api_passes`; off in the shipped
calibration), which solve the whole run at once.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections import deque
from dataclasses import dataclass, field

from tuner.sim.core import DONE, Core, Seq
from tuner.sim.engine import SimulatedEngine
from tuner.sim.vllm_sched import VLLMScheduler

MAX_BURST = 64  # engine steps run back to back when the loop lags the wall clock


@dataclass
class Stream:
    """What one HTTP request waits on: token counts arrive on `queue`; -1 means finished."""

    seq: Seq
    queue: asyncio.Queue[int] = field(default_factory=asyncio.Queue)
    queued: int = 0  # tokens the engine produced for it, handed out at their output time
    ended: bool = False  # its end is queued too
    sent_s: float = 0.0
    first_s: float | None = None


Batch = list[tuple[Stream, int, bool]]  # (stream, new tokens, finished) of one step


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
        cal = engine.cal
        # the virtual face's arrival path (SimulatedEngine._run_once), term for term
        self.per_seq, self.rho_max = cal.ingress_per_seq_s, cal.ingress_rho_max
        self.fixed_in, self.tok_in = cal.ingress_s, cal.ingress_tok_s
        self.fifo_in = bool(self.fixed_in or self.tok_in)
        self.api_free = -math.inf  # when the API server is done with the last request it handed on
        self.spread = random.Random(7919 + cal.jitter_seed) if self.fifo_in and cal.ingress_cv > 0.0 else None
        self.ahead = (bool(cal.sched_ahead) and engine.flavour == "vllm") or engine.sglang_overlap
        sched = self.sched
        self.hold = isinstance(sched, VLLMScheduler) and sched.hold
        self.after = self.hold and bool(getattr(sched, "after_launch", False))
        self.peek = self.after and bool(getattr(sched, "peek", False))
        self.arrived: deque[tuple[float, Seq]] = deque()  # reached the engine, not yet seen by its scheduler
        self.outbox: deque[tuple[float, Batch]] = deque()  # steps' tokens by output time (non-decreasing)
        self.timer: asyncio.TimerHandle | None = None

    def virtual_now(self) -> float:
        return (time.perf_counter() - self.start) * self.scale

    def submit(self, input_len: int, output_len: int) -> Stream:
        """Queue a request now; the caller checked its length against max_model_len."""
        t_send = self.virtual_now()
        s = Seq(self.next_idx, input_len, output_len, t_send)
        self.next_idx += 1
        st = Stream(s, sent_s=t_send)
        self.streams[s.idx] = st
        t_in = self._ingress(s, t_send)
        asyncio.get_running_loop().call_later(max(t_in - t_send, 0.0) / self.scale, self._arrive, t_in, s)
        return st

    def _ingress(self, s: Seq, t_send: float) -> float:
        """When the API server hands the request to the engine: its wait behind the streaming of the running
        sequences (stretched while that server is busy), then its turn in the server's FIFO."""
        sched = self.sched
        t_in, stretch = t_send, 1.0
        if self.per_seq:
            wait = self.per_seq * len(sched.running)
            if self.rho_max and wait:
                step = sched.now - sched.last_start
                rho = wait / step if step > 0.0 else self.rho_max
                stretch = 1.0 / (1.0 - min(rho, self.rho_max))
                wait *= stretch
            t_in += wait
        if self.fifo_in:
            service = (self.fixed_in + self.tok_in * s.inp) * stretch
            if self.spread is not None:
                shape = 1.0 / (self.engine.cal.ingress_cv ** 2)
                service *= self.spread.gammavariate(shape, 1.0 / shape)
            t_in = max(t_in, self.api_free) + service
            self.api_free = t_in
        return t_in

    def _arrive(self, t_in: float, s: Seq) -> None:
        if s.state != DONE:  # not aborted meanwhile
            self.arrived.append((t_in, s))
            self.wake.set()

    def abort(self, st: Stream) -> None:
        if st.seq.state != DONE:
            self.sched.abort(st.seq)
        self.streams.pop(st.seq.idx, None)

    def _admit(self) -> None:
        """Hand the scheduler the requests that reached the engine before the step now starting was scheduled
        (with async scheduling: before the last step started); tell it whether others are in (`incoming`)."""
        sched = self.sched
        gate = sched.now
        if self.ahead:
            gate = sched.last_start
            if self.after and sched.sched_at > gate:  # type: ignore[attr-defined]
                gate = sched.sched_at  # type: ignore[attr-defined]
        arrived = self.arrived
        while arrived and arrived[0][0] <= gate:
            s = arrived.popleft()[1]
            if s.state != DONE:
                sched.waiting.append(s)
        if self.hold:
            sched.incoming = bool(arrived) and arrived[0][0] <= sched.now  # type: ignore[attr-defined]
            sched.t_next = arrived[0][0] if arrived else math.inf  # type: ignore[attr-defined]

    def _launch_end(self) -> float:
        """With the peek: when the next step's launch ends, if after its start (compute the step then), else -inf."""
        launched = getattr(self.sched, "launched", -math.inf)
        return launched if self.peek and launched > self.sched.now else -math.inf

    def _idle(self, now: float) -> None:
        """Nothing in flight: the engine's clock moves to `now` and the next step is scheduled then."""
        sched = self.sched
        sched.idle = True
        sched.now = max(sched.now, now)
        if self.ahead:
            sched.last_start = sched.now

    def _step(self) -> bool:
        """One engine step; its tokens are posted for their output time. False when nothing could run."""
        self._admit()
        sched = self.sched
        if not sched.step():
            return False
        batch: Batch = []
        t_out = -math.inf
        for st in self.streams.values():
            if st.ended:
                continue
            s = st.seq
            g = sched.generated(s)
            done = s.state == DONE
            if g > st.queued or done:
                if st.queued == 0 and s.first is not None:  # (a first token leaves at this step's output time)
                    t_out = max(t_out, s.first)
                batch.append((st, max(g - st.queued, 0), done))
                st.queued = max(g, st.queued)
                st.ended = done
        segs = sched.segs
        if segs:  # the step's decode tokens: (output time, ...) per step; only their latest is needed here
            t_out = max(t_out, segs[-4])
            segs.clear()
        sched.finished.clear()
        if batch:
            self._post(t_out if t_out > -math.inf else sched.now, batch)
        return True

    def _post(self, t_out: float, batch: Batch) -> None:
        if self.outbox and t_out < self.outbox[-1][0]:
            t_out = self.outbox[-1][0]  # in step order, so a stream's end never overtakes its tokens
        self.outbox.append((t_out, batch))
        if self.timer is None:
            self._arm()

    def _arm(self) -> None:
        delay = self.start + self.outbox[0][0] / self.scale - time.perf_counter()
        self.timer = asyncio.get_running_loop().call_later(max(delay, 0.0), self._hand_out)

    def _hand_out(self) -> None:
        """Give the streams the tokens that are due (the head batch, and any others due by now)."""
        self.timer = None
        vnow = self.virtual_now()
        first = True
        while self.outbox and (first or self.outbox[0][0] <= vnow):
            first = False
            for st, k, done in self.outbox.popleft()[1]:
                if st.seq.idx not in self.streams:  # the client went away
                    continue
                if k:
                    if st.first_s is None:
                        st.first_s = vnow
                        self.ttfts.append(vnow - st.sent_s)
                    self.generation_tokens += k
                    st.queue.put_nowait(k)
                if done:
                    st.queue.put_nowait(-1)
                    self.success += 1
                    self.streams.pop(st.seq.idx, None)
        if self.outbox:
            self._arm()

    async def run(self) -> None:
        sched = self.sched
        while True:
            if self.hung or not (sched.waiting or sched.running or self.arrived):
                self.wake.clear()
                await self.wake.wait()
                if not self.hung:
                    self._idle(self.virtual_now())
                continue
            wait_to = self._launch_end()
            if wait_to > self.virtual_now():
                await asyncio.sleep(self.start + wait_to / self.scale - time.perf_counter())
            if not self._step():
                if self.arrived and not sched.running:  # held by the gate only: nothing is in flight
                    self._idle(max(sched.now, self.arrived[0][0]))
                    continue
                self.wake.clear()
                await self.wake.wait()
                continue
            # at high time scales one step is shorter than the loop's own overhead: catch up with the
            # wall clock (a bounded burst) before sleeping, so virtual time does not fall behind
            burst = 1
            while (burst < MAX_BURST and sched.now < self.virtual_now() and self._launch_end() <= self.virtual_now()
                   and self._step()):
                burst += 1
            delay = self.start + sched.now / self.scale - time.perf_counter()
            await asyncio.sleep(max(delay, 0.0))
