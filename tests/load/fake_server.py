"""A real streaming OpenAI-compatible server for the load tests, with known, injected delays.

Run as a process: `python fake_server.py --ttft-ms 50 --itl-ms 10 [--port 0]`; it prints
`PORT <n>` once it listens. Delays are kept precisely with a timer thread (asyncio's own timers
wake up to 1 ms late), anchored to when the request arrived: token i leaves at
arrival + ttft + i * itl (+ the wait for a slot when --max-running is given).
Also serves /metrics (vLLM names), /log (what each request asked for) and /timings (when each
chunk was written, by X-Request-Id) so tests can check the client against the server's truth.
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import itertools
import json
import os
import sys
import threading
import time
from typing import Any

from aiohttp import web


class PreciseTimer:
    """Wake coroutines at perf_counter deadlines with ~0.1 ms precision (one helper thread)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._cond = threading.Condition()
        self._seq = itertools.count()
        threading.Thread(target=self._loop, daemon=True).start()

    async def until(self, deadline: float) -> None:
        if deadline <= time.perf_counter():
            return
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        with self._cond:
            heapq.heappush(self._heap, (deadline, next(self._seq), loop, fut))
            self._cond.notify()
        await fut

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._heap:
                    self._cond.wait()
                deadline, _, loop, fut = self._heap[0]
                wait = deadline - time.perf_counter()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                heapq.heappop(self._heap)
            loop.call_soon_threadsafe(_wake, fut)


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class FakeEngine:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.timer = PreciseTimer()
        self.slots = asyncio.Semaphore(args.max_running) if args.max_running else None
        self.running = self.waiting = self.count = 0
        self.log: list[dict[str, Any]] = []
        self.timings: dict[str, list[float]] = {}

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, chat=False)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, chat=True)

    async def _serve(self, request: web.Request, chat: bool) -> web.StreamResponse:
        arrived = time.perf_counter()
        body = await request.json()
        self.count += 1
        rid = request.headers.get("X-Request-Id", str(self.count))
        prompt = body["messages"][-1]["content"] if chat else body["prompt"]
        n_prompt = len(prompt) if isinstance(prompt, list) else len(prompt.split())
        self.log.append({"rid": rid, "arrived": arrived, "prompt_tokens": n_prompt, "max_tokens": body.get("max_tokens"),
                         "ignore_eos": body.get("ignore_eos"), "stream": body.get("stream"),
                         "include_usage": (body.get("stream_options") or {}).get("include_usage"),
                         "head": prompt[:16] if isinstance(prompt, list) else prompt.split()[:16]})
        if self.args.fail_every and self.count % self.args.fail_every == 0:
            return web.json_response({"object": "error", "message": "injected failure"}, status=500)
        if self.slots is not None:
            self.waiting += 1
            await self.slots.acquire()
            self.waiting -= 1
            arrived = time.perf_counter()
        self.running += 1
        try:
            return await self._stream(request, rid, chat, int(body.get("max_tokens") or 16), n_prompt, arrived)
        except ConnectionResetError:  # the client went away (cancelled or timed out): nothing to send
            return web.Response(status=499)
        finally:
            self.running -= 1
            if self.slots is not None:
                self.slots.release()

    async def _stream(self, request: web.Request, rid: str, chat: bool, n_out: int, n_prompt: int,
                      arrived: float) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        sent = self.timings.setdefault(rid, [])
        ttft, itl = self.args.ttft_ms / 1e3, self.args.itl_ms / 1e3
        for i in range(n_out):
            await self.timer.until(arrived + ttft + i * itl)
            if self.args.drop_after and i == self.args.drop_after:
                request.transport.close()  # type: ignore[union-attr]
                return resp
            if chat:
                choice: dict[str, Any] = {"index": 0, "delta": {"content": f" t{i}"}, "finish_reason": None}
            else:
                choice = {"index": 0, "text": f" t{i}", "finish_reason": None}
            data = json.dumps({"id": rid, "object": "chunk", "model": "fake", "choices": [choice]})
            sent.append(time.perf_counter())
            await resp.write(f"data: {data}\n\n".encode())
        usage = {"prompt_tokens": n_prompt, "completion_tokens": n_out, "total_tokens": n_prompt + n_out}
        await resp.write(f"data: {json.dumps({'id': rid, 'choices': [], 'usage': usage})}\n\n".encode())
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def metrics(self, request: web.Request) -> web.Response:
        text = (
            "# TYPE vllm:num_requests_running gauge\n"
            f'vllm:num_requests_running{{model_name="fake"}} {self.running}\n'
            f'vllm:num_requests_waiting{{model_name="fake"}} {self.waiting}\n'
            f'vllm:kv_cache_usage_perc{{model_name="fake"}} {min(1.0, self.running / 64):.3f}\n'
            f'vllm:num_preemptions_total{{model_name="fake"}} 0\n'
        )
        return web.Response(text=text)

    async def get_log(self, request: web.Request) -> web.Response:
        return web.json_response(self.log)

    async def get_timings(self, request: web.Request) -> web.Response:
        return web.json_response(self.timings)


async def main(args: argparse.Namespace) -> None:
    engine = FakeEngine(args)
    app = web.Application()
    app.router.add_post("/v1/completions", engine.completions)
    app.router.add_post("/v1/chat/completions", engine.chat)
    app.router.add_get("/metrics", engine.metrics)
    app.router.add_get("/log", engine.get_log)
    app.router.add_get("/timings", engine.get_timings)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", args.port, backlog=1024)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    print(f"PORT {port}", flush=True)
    await asyncio.Event().wait()


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--ttft-ms", type=float, default=20.0)
    p.add_argument("--itl-ms", type=float, default=5.0)
    p.add_argument("--max-running", type=int, default=0)
    p.add_argument("--fail-every", type=int, default=0)
    p.add_argument("--drop-after", type=int, default=0)
    p.add_argument("--cpu", type=int, default=-1)
    p.add_argument("--realtime", action="store_true", help="SCHED_FIFO where permitted (timing tests)")
    return p.parse_args(argv)


if __name__ == "__main__":
    ns = parse(sys.argv[1:])
    if ns.cpu >= 0 and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {ns.cpu})
    if ns.realtime:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(5))  # this thread and those it starts
        except (AttributeError, PermissionError, OSError):
            pass
    try:
        import uvloop

        uvloop.run(main(ns))
    except ImportError:
        asyncio.run(main(ns))
