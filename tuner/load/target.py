"""Where load goes: a real OpenAI-compatible HTTP endpoint, or the simulator's virtual time.

`HttpTarget` is the one streaming client: asyncio (uvloop when installed) and servetune's own
HTTP/1.1 client (tuner.load.http1: every socket read stamped with the kernel's receive time where
the platform gives it, else when the loop gets it), one SSE
parser for both endpoints, per-request timestamps (sent, every streamed chunk, done), the server's
usage, and errors or timeouts recorded as data. Warm-up requests run first, as their own phase, so
they never overlap measured ones; each phase has its own clock (seconds since the phase began).

What keeps the client's own time out of the measurements: request bodies are built before their
send time; connections are opened before the measured window; records reach the sink (a Parquet
writer) only after the window; GC runs over a frozen heap; and the client's own delay is measured
throughout (tuner.load.ruler) and reported with the run as `client.*`.
"""

from __future__ import annotations

import asyncio
import gc
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol
from urllib.parse import urlsplit

import aiohttp

from tuner.load.earlystop import LiveView
from tuner.load.http1 import Client, Clock, HttpError
from tuner.load.probes import GpuSampler, MetricNames, sample_gpus, scrape_metrics
from tuner.load.prompts import PromptBuilder
from tuner.load.records import Request, RequestRecord
from tuner.load.ruler import Ruler
from tuner.load.stream import StreamReader

if TYPE_CHECKING:
    from tuner.sim import SimulatedEngine

Sink = Callable[[RequestRecord], None]
StopCheck = Callable[[LiveView], "str | None"]
CHECK_PERIOD_S = 0.25


class Target(Protocol):
    def run(self, requests: Sequence[Request], *, concurrency: int | None = None,
            sink: Sink | None = None) -> list[RequestRecord]: ...


class VirtualTarget:
    """The simulator's virtual-time face: the same requests, records on a virtual clock."""

    supports_stop = False

    def __init__(self, engine: SimulatedEngine) -> None:
        self.engine = engine
        self.last_probes: list[dict[str, Any]] = []
        self.stopped_early: str | None = None

    def run(self, requests: Sequence[Request], *, concurrency: int | None = None,
            sink: Sink | None = None) -> list[RequestRecord]:
        # as HttpTarget: the warm-up phase ends before the measured one starts (run together, the warm-ups'
        # prompts would queue with the first measured ones: +40-60 % P99 TTFT on the H200 dynamic study)
        warm = [r for r in requests if r.warmup]
        measured = [r for r in requests if not r.warmup]
        if warm and measured:
            records = list(self.engine.run(warm, concurrency=concurrency)) + list(
                self.engine.run(measured, concurrency=concurrency))
        else:
            records = list(self.engine.run(list(requests), concurrency=concurrency))
        if sink is not None:
            for r in records:
                sink(r)
        return records


class HttpTarget:
    supports_stop = True

    def __init__(
        self, base_url: str, model: str, *, api: Literal["completions", "chat"] = "completions",
        prompt_mode: Literal["words", "token_ids", "tokenizer"] = "words", tokenizer: str | None = None,
        timeout_s: float = 300, ignore_eos: bool = True, scrape_metrics: bool = True,
        metrics_prefix: str = "vllm:", metric_names: MetricNames | None = None, processes: int = 1,
        client_clock: Clock = "auto", time_scale: float = 1.0,
    ) -> None:
        """`time_scale`: the server runs that many times faster than the wall clock (the simulator's server
        face): requests go out at arrival_s / time_scale and every recorded time is wall x time_scale, so
        records read on the server's clock; `timeout_s` is on that clock too, as the SLA it guards."""
        self.settings: dict[str, Any] = {  # to build the same client in another process
            "base_url": base_url, "model": model, "api": api, "prompt_mode": prompt_mode, "tokenizer": tokenizer,
            "timeout_s": timeout_s, "ignore_eos": ignore_eos, "scrape_metrics": scrape_metrics,
            "metrics_prefix": metrics_prefix, "metric_names": dict(metric_names or {}), "client_clock": client_clock,
            "time_scale": time_scale}
        self.scale = time_scale
        self.client_clock = client_clock
        root = base_url.rstrip("/").removesuffix("/v1")
        self.root, self.model, self.api = root, model, api
        self.url = f"{root}/v1/chat/completions" if api == "chat" else f"{root}/v1/completions"
        prefix = urlsplit(root).path.rstrip("/")
        self.path = f"{prefix}/v1/chat/completions" if api == "chat" else f"{prefix}/v1/completions"
        if api == "chat" and prompt_mode == "token_ids":
            from tuner.common.errors import SpecError

            raise SpecError("token-id prompts work on /v1/completions only", "workload.prompt",
                            "use api completions, or prompt: words / tokenizer")
        self.prompts = PromptBuilder(prompt_mode, tokenizer)
        self.timeout_s, self.ignore_eos = timeout_s, ignore_eos
        self.scrape, self.metrics_prefix = scrape_metrics, metrics_prefix
        self.metric_names: MetricNames = metric_names or {}  # the engine's (tuner.engines): none, no probes
        self.last_probes: list[dict[str, Any]] = []
        self.last_client: dict[str, float] = {}  # the client's own timing error in the last measured window
        self.stopped_early: str | None = None  # reason the last run was stopped, if it was
        self.t0 = 0.0  # perf_counter() at the start of the last measured phase
        self.processes = processes
        # set in each process of a split run (tuner.load.multi): blocks until all are ready, returns the start
        self.window_start: Callable[[], float] | None = None

    # ---- public -----------------------------------------------------------------------------
    def run(self, requests: Sequence[Request], *, concurrency: int | None = None, sink: Sink | None = None,
            stop: StopCheck | None = None, send_until_s: float | None = None,
            progress: bool = False) -> list[RequestRecord]:
        """Send `requests` (blocking); see `arun`. Uses uvloop when it is installed. With `processes` > 1
        and no `stop` check, the requests are split over that many client processes (tuner.load.multi).

        Each run gets new prompt text for the same lengths: a capacity search sends the same request ids
        at every load point, and an engine's prefix cache must not serve a later point from an earlier one.
        """
        self.prompts.run_salt += 1
        if self.processes > 1 and stop is None:
            from tuner.load.multi import run_split

            records = run_split(self, requests, concurrency, send_until_s)
            if sink is not None:
                for rec in records:
                    sink(rec)
            return records
        try:
            import uvloop

            loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
        except ImportError:
            loop = asyncio.new_event_loop()
        try:
            return loop.run_until_complete(self.arun(requests, concurrency=concurrency, sink=sink, stop=stop,
                                                     send_until_s=send_until_s, progress=progress))
        finally:
            loop.close()

    async def arun(self, requests: Sequence[Request], *, concurrency: int | None = None,
                   sink: Sink | None = None, stop: StopCheck | None = None, send_until_s: float | None = None,
                   progress: bool = False) -> list[RequestRecord]:
        """Warm-up phase, then the measured phase. Open loop at each request's `arrival_s`, at most
        `concurrency` in flight (closed loop when every arrival is 0). `stop` is asked every 0.25 s
        and a reason ends the run (in-flight requests cancelled); `send_until_s` stops sending
        new requests after that many seconds and lets those in flight finish. `sink` gets every
        record when its phase has ended (writing them mid-phase would stall the event loop)."""
        self.last_probes, self.stopped_early, self.last_client = [], None, {}
        warm = [r for r in requests if r.warmup]
        measured = [r for r in requests if not r.warmup]
        client = Client(self.root, clock=self.client_clock)
        ruler = Ruler(scale=self.scale)
        await ruler.start()
        connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
        timeout = aiohttp.ClientTimeout(total=self.timeout_s)
        frozen = False
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            gpus = GpuSampler()
            probes = self._start_probes(session, gpus)
            try:
                records: list[RequestRecord] = []
                if warm:
                    records += await self._phase(client, warm, concurrency or len(warm), None, None, None, None)
                await client.warm(_pool_size(warm, measured, records, concurrency))
                # objects alive now (the requests, the warm-up) are never garbage: keep the collector off them
                gc.collect()
                gc.freeze()
                frozen = True
                start = None
                if self.window_start is not None:  # several client processes: one shared window start
                    start = self.window_start()
                    await _sleep_until(start)
                ruler.reset()
                connects, busy, began = client.connects, client.busy_s, time.perf_counter()
                reads, kreads, sends = client.reads, client.kernel_reads, len(client.send_gaps)
                bar = _Progress(len(measured)) if progress else None
                try:
                    records += await self._phase(client, measured, concurrency, stop, send_until_s, bar, ruler,
                                                 t0=start)
                finally:
                    ruler.connects = client.connects - connects
                    ruler.busy = (client.busy_s - busy) / max(time.perf_counter() - began, 1e-9)
                    ruler.send_gaps = client.send_gaps[sends:]
                    ruler.tokens = sum(len(r.token_times) for r in records if not r.warmup)
                    if client.reads > reads:
                        ruler.kernel_share = (client.kernel_reads - kreads) / (client.reads - reads)
                    if client.clock is not None:
                        ruler.clock_drift_s = client.clock.remeasure()
                        ruler.clock_uncertainty_s = client.clock.uncertainty_s
                    ruler.stop()
                    self.last_client = ruler.summary()
                    if bar is not None:
                        bar.close()
            finally:
                if frozen:
                    gc.unfreeze()
                ruler.stop()
                client.close()
                for task in probes:
                    task.cancel()
                await asyncio.gather(*probes, return_exceptions=True)
                gpus.close()
        if sink is not None:
            for rec in records:
                sink(rec)
        return records

    # ---- one phase ----------------------------------------------------------------------------
    async def _phase(self, client: Client, requests: list[Request], concurrency: int | None,
                     stop: StopCheck | None, send_until_s: float | None, bar: _Progress | None,
                     ruler: Ruler | None = None, t0: float | None = None) -> list[RequestRecord]:
        t0 = time.perf_counter() if t0 is None else t0
        if not any(r.warmup for r in requests):
            self.t0 = t0
        order = sorted(range(len(requests)), key=lambda i: requests[i].arrival_s)
        records = [RequestRecord(id=r.id, cls=r.cls, input_len=r.input_len, output_len=r.output_len,
                                 sent_s=0.0, warmup=r.warmup) for r in requests]
        inflight: dict[int, RequestRecord] = {}
        completed: list[RequestRecord] = []
        sem = asyncio.Semaphore(concurrency) if concurrency else None
        tasks: set[asyncio.Task[None]] = set()
        state: dict[str, Any] = {"sent": 0, "reason": None}
        sent_ids: set[int] = set()
        late = ruler.send_late if ruler is not None else None
        shared = ruler.shared if ruler is not None else None
        open_loop = any(r.arrival_s > 0 for r in requests)
        scale = self.scale

        def finished(rec: RequestRecord) -> None:
            inflight.pop(rec.id, None)
            if not rec.warmup:
                completed.append(rec)
            if sem is not None:
                sem.release()
            if bar is not None:
                bar.advance()

        async def dispatch() -> None:
            for i in order:
                req = requests[i]
                payload = self._prepared(client, req)  # built before its send time, not in it
                due = t0 + req.arrival_s / scale
                await _sleep_until(due)
                if sem is not None:
                    await sem.acquire()
                if send_until_s is not None and (time.perf_counter() - t0) * scale >= send_until_s:
                    if sem is not None:
                        sem.release()
                    break
                rec = records[i]
                now = time.perf_counter() - t0
                rec.sent_s = now * scale  # refined when the bytes are written
                if late is not None and open_loop:
                    late.append(now - req.arrival_s / scale)  # wall seconds, as the ruler's other inputs
                inflight[rec.id] = rec
                sent_ids.add(rec.id)
                state["sent"] += 1
                task = asyncio.create_task(self._one(client, payload, rec, t0, finished, shared))
                tasks.add(task)
                task.add_done_callback(tasks.discard)

        async def watch() -> None:
            while True:
                await asyncio.sleep(CHECK_PERIOD_S)
                assert stop is not None
                view = LiveView((time.perf_counter() - t0) * scale, inflight, completed, state["sent"], len(requests))
                reason = stop(view)
                if reason:
                    state["reason"] = reason
                    return

        sender = asyncio.create_task(dispatch())
        watcher = asyncio.create_task(watch()) if stop is not None else None
        if watcher is None:
            await sender
        else:
            await asyncio.wait({sender, watcher}, return_when=asyncio.FIRST_COMPLETED)
        if watcher is not None and not watcher.done():
            # everything is sent: keep watching while the in-flight requests finish
            while tasks and not watcher.done():
                await asyncio.wait({watcher, *tasks}, return_when=asyncio.FIRST_COMPLETED)
        if state["reason"]:
            self.stopped_early = str(state["reason"])
            sender.cancel()
            for task in list(tasks):
                task.cancel()
        if watcher is not None:
            watcher.cancel()
        await asyncio.gather(sender, *(watcher,) if watcher else (), return_exceptions=True)
        while tasks:
            await asyncio.gather(*list(tasks), return_exceptions=True)
        for rec in inflight.values():  # cancelled before they started
            rec.error = rec.error or "cancelled: load point stopped early"
        return [r for r in records if r.id in sent_ids]

    # ---- one request ------------------------------------------------------------------------------
    def _payload(self, req: Request) -> bytes:
        prompt = self.prompts.build(req)
        body: dict[str, Any] = {"model": self.model, "max_tokens": req.output_len, "stream": True,
                                "stream_options": {"include_usage": True}}
        if self.ignore_eos:
            body["ignore_eos"] = True
        if self.api == "chat":
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        return json.dumps(body, separators=(",", ":")).encode()

    def _prepared(self, client: Client, req: Request) -> bytes:
        """The request's bytes on the wire (head and body)."""
        body = self._payload(req)
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream",
                   "X-Request-Id": f"st-{req.id}"}
        return client.head("POST", self.path, headers, body) + body

    async def _one(self, client: Client, payload: bytes, rec: RequestRecord, t0: float,
                   finished: Callable[[RequestRecord], None], shared: list[tuple[int, float]] | None = None) -> None:
        times = rec.token_times
        reader = StreamReader(times)
        last = [math.nan]

        scale = self.scale

        def on_body(data: bytes, t: float, span: float) -> None:
            last[0] = (t - t0) * scale
            n = len(times)
            reader.feed(data, last[0])
            if shared is not None and len(times) - n > 1:
                # several tokens of this stream in one read: all but the last may have come up to `span` earlier
                shared.append((len(times) - n - 1, span))

        def on_sent(t: float) -> None:
            rec.sent_s = (t - t0) * scale  # right before the bytes go to the socket, on a connection already open

        try:
            resp = await asyncio.wait_for(client.request("POST", self.path, prepared=payload, on_body=on_body,
                                                         on_sent=on_sent), self.timeout_s / scale)
            if resp.status != 200:
                text = resp.body[:200].decode("utf-8", "replace").replace("\n", " ")
                rec.error = f"http {resp.status}: {text}"
                return
            reader.close(last[0])
            rec.first_token_s = reader.first
            rec.done_s = reader.done_at if reader.done_at is not None else last[0]
            rec.output_tokens = reader.usage_tokens if reader.usage_tokens is not None else len(rec.token_times)
            rec.error = rec.error or reader.error
            if rec.error is None and not reader.done:
                rec.error = "stream ended without [DONE]"
        except asyncio.CancelledError:
            rec.error = "cancelled: load point stopped early"
        except TimeoutError:
            rec.error = f"timeout after {self.timeout_s:g} s"
        except (HttpError, OSError) as exc:
            rec.error = f"{type(exc).__name__}: {exc}"[:200]
        finally:
            if rec.error is not None:
                rec.done_s = None
                if rec.first_token_s is None:
                    rec.first_token_s = reader.first
            finished(rec)

    # ---- probes ---------------------------------------------------------------------------------
    def _start_probes(self, session: aiohttp.ClientSession, gpus: GpuSampler) -> list[asyncio.Task[None]]:
        tasks: list[asyncio.Task[None]] = []
        base = time.perf_counter()

        def clock() -> float:
            return (time.perf_counter() - base) * self.scale

        if self.scrape:
            tasks.append(asyncio.create_task(
                scrape_metrics(session, f"{self.root}/metrics", self.metrics_prefix, self.metric_names, clock, self.last_probes)))
        if gpus.active:
            tasks.append(asyncio.create_task(sample_gpus(gpus, clock, self.last_probes)))
        return tasks


def _pool_size(warm: list[Request], measured: list[Request], done: list[RequestRecord],
               concurrency: int | None) -> int:
    """Connections to open before the measured window: its concurrency, or for open loop the
    arrival rate times twice the warm-up's longest request (at least 8), capped by the request count."""
    if not measured:
        return 0
    if concurrency:
        return min(concurrency, len(measured))
    span = max(r.arrival_s for r in measured) - min(r.arrival_s for r in measured)
    if span <= 0:
        return min(len(measured), 1024)
    longest = max((r.e2e_s for r in done if r.e2e_s is not None), default=1.0)
    return int(min(len(measured), 1024, max(8, math.ceil(len(measured) / span * 2 * longest) + 4)))


async def _sleep_until(deadline: float) -> None:
    """Timers may fire up to a clock tick early (uvloop rounds to 1 ms), and under uvloop a wait of less than a tick
    comes back on the next loop turn: never wake before `deadline`. The loop ends on the clock, not on a count (a
    cap of 100 turns sent requests up to ~0.5 ms early: 1.5 ms took 157 turns here, 0.2 ms 84; other tasks still
    run between the turns)."""
    while True:
        delay = deadline - time.perf_counter()
        if delay <= 0:
            return
        await asyncio.sleep(delay)


class _Progress:
    """A one-line count of finished requests on a terminal's stderr, redrawn twice a second by the
    event loop (a write of a few microseconds). Not rich's live bar: its render took a few ms in a
    thread holding the GIL, stalling the loop twice a second, which showed in the P99 timings."""

    def __init__(self, total: int) -> None:
        self.total, self.done = total, 0
        self.t0 = time.perf_counter()
        self.out = sys.stderr
        self.live = self.out.isatty()
        self._handle = asyncio.get_running_loop().call_later(0.5, self._draw) if self.live else None

    def advance(self) -> None:
        self.done += 1

    def _draw(self) -> None:
        self.out.write(f"\rrequests {self.done}/{self.total}  {time.perf_counter() - self.t0:.0f} s")
        self.out.flush()
        self._handle = asyncio.get_running_loop().call_later(0.5, self._draw)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self.out.write("\r\x1b[K")
            self.out.flush()
