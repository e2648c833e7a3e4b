"""Where load goes: a real OpenAI-compatible HTTP endpoint, or the simulator's virtual time.

`HttpTarget` is the one streaming client: asyncio + aiohttp, one connection pool per run, one SSE
parser for both endpoints, per-request timestamps (sent, every streamed chunk, done), the server's
usage, and errors or timeouts recorded as data. Warm-up requests run first, as their own phase, so
they never overlap measured ones; each phase has its own clock (seconds since the phase began).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

import aiohttp

from tuner.load.earlystop import LiveView
from tuner.load.probes import GpuSampler, sample_gpus, scrape_metrics
from tuner.load.prompts import PromptBuilder
from tuner.load.records import Request, RequestRecord
from tuner.load.stream import BatchClock, StreamReader

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
        metrics_prefix: str = "vllm:",
    ) -> None:
        root = base_url.rstrip("/").removesuffix("/v1")
        self.root, self.model, self.api = root, model, api
        self.url = f"{root}/v1/chat/completions" if api == "chat" else f"{root}/v1/completions"
        if api == "chat" and prompt_mode == "token_ids":
            from tuner.common.errors import SpecError

            raise SpecError("token-id prompts work on /v1/completions only", "workload.prompt",
                            "use api completions, or prompt: words / tokenizer")
        self.prompts = PromptBuilder(prompt_mode, tokenizer)
        self.timeout_s, self.ignore_eos = timeout_s, ignore_eos
        self.scrape, self.metrics_prefix = scrape_metrics, metrics_prefix
        self.last_probes: list[dict[str, Any]] = []
        self.stopped_early: str | None = None  # reason the last run was stopped, if it was
        self.t0 = 0.0  # perf_counter() at the start of the last measured phase

    # ---- public -----------------------------------------------------------------------------
    def run(self, requests: Sequence[Request], *, concurrency: int | None = None, sink: Sink | None = None,
            stop: StopCheck | None = None, send_until_s: float | None = None,
            progress: bool = False) -> list[RequestRecord]:
        """Send `requests` (blocking); see `arun`. Uses uvloop when it is installed.

        Each run gets new prompt text for the same lengths: a capacity search sends the same request ids
        at every load point, and an engine's prefix cache must not serve a later point from an earlier one.
        """
        self.prompts.run_salt += 1
        try:
            import uvloop

            loop = uvloop.new_event_loop()
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
        new requests after that many seconds and lets those in flight finish."""
        self.last_probes, self.stopped_early = [], None
        self._clock = BatchClock(asyncio.get_running_loop())
        warm = [r for r in requests if r.warmup]
        measured = [r for r in requests if not r.warmup]
        connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
        timeout = aiohttp.ClientTimeout(total=self.timeout_s)
        # `sent` is when the body goes to the socket: connection set-up and request building are
        # the client's time, not the engine's, and would otherwise leak into TTFT and E2E.
        trace = aiohttp.TraceConfig()
        trace.on_request_chunk_sent.append(_mark_sent)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout, trace_configs=[trace]) as session:
            gpus = GpuSampler()
            probes = self._start_probes(session, gpus)
            try:
                records: list[RequestRecord] = []
                if warm:
                    records += await self._phase(session, warm, concurrency or len(warm), sink, None, None, None)
                bar = _Progress(len(measured)) if progress else None
                try:
                    records += await self._phase(session, measured, concurrency, sink, stop, send_until_s, bar)
                finally:
                    if bar is not None:
                        bar.close()
            finally:
                for task in probes:
                    task.cancel()
                await asyncio.gather(*probes, return_exceptions=True)
                gpus.close()
        return records

    # ---- one phase ----------------------------------------------------------------------------
    async def _phase(self, session: aiohttp.ClientSession, requests: list[Request], concurrency: int | None,
                     sink: Sink | None, stop: StopCheck | None, send_until_s: float | None,
                     bar: _Progress | None) -> list[RequestRecord]:
        t0 = time.perf_counter()
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

        def finished(rec: RequestRecord) -> None:
            inflight.pop(rec.id, None)
            if not rec.warmup:
                completed.append(rec)
            if sem is not None:
                sem.release()
            if bar is not None:
                bar.advance()
            if sink is not None:
                sink(rec)

        async def dispatch() -> None:
            for i in order:
                req = requests[i]
                await _sleep_until(t0 + req.arrival_s)
                if sem is not None:
                    await sem.acquire()
                if send_until_s is not None and time.perf_counter() - t0 >= send_until_s:
                    if sem is not None:
                        sem.release()
                    break
                rec = records[i]
                rec.sent_s = time.perf_counter() - t0  # refined when the body is written
                inflight[rec.id] = rec
                sent_ids.add(rec.id)
                state["sent"] += 1
                task = asyncio.create_task(self._one(session, req, rec, t0, finished))
                tasks.add(task)
                task.add_done_callback(tasks.discard)

        async def watch() -> None:
            while True:
                await asyncio.sleep(CHECK_PERIOD_S)
                assert stop is not None
                view = LiveView(time.perf_counter() - t0, inflight, completed, state["sent"], len(requests))
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

    async def _one(self, session: aiohttp.ClientSession, req: Request, rec: RequestRecord, t0: float,
                   finished: Callable[[RequestRecord], None]) -> None:
        body = self._payload(req)
        headers = {"Content-Type": "application/json", "X-Request-Id": f"st-{req.id}"}
        perf = time.perf_counter
        rec.sent_s = perf() - t0
        try:
            async with session.post(self.url, data=body, headers=headers, trace_request_ctx=(rec, t0)) as resp:
                if resp.status != 200:
                    text = (await resp.text())[:200].replace("\n", " ")
                    rec.error = f"http {resp.status}: {text}"
                    return
                await self._stream(resp, rec, t0)
        except asyncio.CancelledError:
            rec.error = "cancelled: load point stopped early"
        except TimeoutError:
            rec.error = f"timeout after {self.timeout_s:g} s"
        except aiohttp.ClientError as exc:
            rec.error = f"{type(exc).__name__}: {exc}"[:200]
        finally:
            if rec.error is not None:
                rec.done_s = None
            finished(rec)

    async def _stream(self, resp: aiohttp.ClientResponse, rec: RequestRecord, t0: float) -> None:
        reader = StreamReader(rec.token_times)
        clock = self._clock.now
        async for chunk in resp.content.iter_any():
            reader.feed(chunk, clock() - t0)
        now = time.perf_counter() - t0
        reader.close(now)
        rec.first_token_s = reader.first
        rec.done_s = now
        rec.output_tokens = reader.usage_tokens if reader.usage_tokens is not None else len(rec.token_times)
        rec.error = rec.error or reader.error
        if rec.error is None and not reader.done:
            rec.error = "stream ended without [DONE]"

    # ---- probes ---------------------------------------------------------------------------------
    def _start_probes(self, session: aiohttp.ClientSession, gpus: GpuSampler) -> list[asyncio.Task[None]]:
        tasks: list[asyncio.Task[None]] = []
        base = time.perf_counter()

        def clock() -> float:
            return time.perf_counter() - base

        if self.scrape:
            tasks.append(asyncio.create_task(
                scrape_metrics(session, f"{self.root}/metrics", self.metrics_prefix, clock, self.last_probes)))
        if gpus.active:
            tasks.append(asyncio.create_task(sample_gpus(gpus, clock, self.last_probes)))
        return tasks


async def _sleep_until(deadline: float) -> None:
    """Timers may fire up to a clock tick early (uvloop rounds to 1 ms): never wake before `deadline`."""
    for _ in range(100):
        delay = deadline - time.perf_counter()
        if delay <= 0:
            return
        await asyncio.sleep(delay)


async def _mark_sent(session: aiohttp.ClientSession, ctx: Any, params: Any) -> None:
    rec, t0 = ctx.trace_request_ctx
    rec.sent_s = time.perf_counter() - t0


class _Progress:
    """A rich progress bar over the measured requests (refreshed twice a second to stay cheap)."""

    def __init__(self, total: int) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._p = Progress(TextColumn("requests"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                           refresh_per_second=2, transient=True)
        self._task = self._p.add_task("load", total=total)
        self._p.start()

    def advance(self) -> None:
        self._p.advance(self._task)

    def close(self) -> None:
        self._p.stop()
