"""`python -m tuner.sim.server`: the simulated engine as an OpenAI-compatible streaming server.

Flags mirror the real engines' (`--max-num-seqs 64`, `--enable-chunked-prefill` /
`--no-enable-chunked-prefill`, ...). Startup failures (memory, config) print the engine-like
message to stderr and exit 1 before listening. Prompt length: a text prompt counts one token per
whitespace-separated word, a list of token ids counts its length, a chat counts the words of all
message contents. Output is one word ("tok ") per token, always exactly `max_tokens` of them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
import uuid
from collections.abc import Sequence
from typing import Any

from aiohttp import web

from tuner.common.errors import EngineStartError, SpecError
from tuner.sim.catalog import shape_for
from tuner.sim.engine import SimulatedEngine
from tuner.sim.faults import Faults, add_fault_flags
from tuner.sim.knobs import FLAVOURS, knobs
from tuner.sim.live import LiveEngine, Stream
from tuner.sim.prom import Metrics

WORD = "tok "


class BadRequest(Exception):
    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def prompt_tokens(body: dict[str, Any], chat: bool) -> int:
    """The documented length rule: words of text, length of token-id lists, words of chat contents."""
    if chat:
        msgs = body.get("messages")
        if not isinstance(msgs, list) or not msgs:
            raise BadRequest("messages must be a non-empty list")
        n = 0
        for m in msgs:
            content = m.get("content") if isinstance(m, dict) else None
            if isinstance(content, str):
                n += len(content.split())
            elif isinstance(content, list):
                n += sum(len(str(p.get("text", "")).split()) for p in content if isinstance(p, dict))
        return n
    p = body.get("prompt")
    if isinstance(p, str):
        return len(p.split())
    if isinstance(p, list) and p and all(isinstance(x, int) for x in p):
        return len(p)
    if isinstance(p, list) and len(p) == 1:
        inner = p[0]
        if isinstance(inner, str):
            return len(inner.split())
        if isinstance(inner, list) and all(isinstance(x, int) for x in inner):
            return len(inner)
    raise BadRequest("prompt must be a string, a list of token ids, or a one-element list of either")


def _error(message: str, status: int) -> web.Response:
    kind = "BadRequestError" if status == 400 else ("NotFoundError" if status == 404 else "InternalServerError")
    return web.json_response({"error": {"message": message, "type": kind, "param": None, "code": status}},
                             status=status)


class SimServer:
    def __init__(self, engine: SimulatedEngine, names: list[str], root: str, flavour: str, time_scale: float,
                 faults: Faults) -> None:
        self.engine = engine
        self.names = names
        self.root = root
        self.live = LiveEngine(engine, time_scale)
        self.metrics = Metrics(self.live, names[0], flavour)
        self.faults = faults
        self.accepted = 0
        self.rng = random.Random(faults.seed)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/health", self.health)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/metrics", self.prom)
        app.router.add_get("/server_info", self.server_info)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.on_startup.append(self._start)
        app.on_cleanup.append(self._stop)
        return app

    async def _start(self, app: web.Application) -> None:
        app["loop_task"] = asyncio.create_task(self.live.run())

    async def _stop(self, app: web.Application) -> None:
        app["loop_task"].cancel()

    async def health(self, request: web.Request) -> web.Response:
        if self.faults.never_ready:
            return web.Response(status=503)
        return web.Response(status=200)

    async def models(self, request: web.Request) -> web.Response:
        now = int(time.time())
        data = [{"id": n, "object": "model", "created": now, "owned_by": "servetune-sim", "root": self.root,
                 "parent": None, "max_model_len": self.engine.max_model_len} for n in self.names]
        return web.json_response({"object": "list", "data": data})

    async def prom(self, request: web.Request) -> web.Response:
        return web.Response(text=self.metrics.render(), content_type="text/plain")

    async def server_info(self, request: web.Request) -> web.Response:
        return web.json_response(self.engine.resolved)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, chat=False)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, chat=True)

    def _admit(self, body: dict[str, Any], chat: bool) -> tuple[int, int]:
        model = body.get("model")
        if model is not None and model not in self.names:
            raise BadRequest(f"The model `{model}` does not exist.", 404)
        n_in = prompt_tokens(body, chat)
        if n_in < 1:
            raise BadRequest("The prompt must contain at least one token.")
        mml = self.engine.max_model_len
        default_out = mml - n_in if chat else 16
        max_tokens = body.get("max_completion_tokens") if chat else None
        max_tokens = max_tokens if max_tokens is not None else body.get("max_tokens", default_out)
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise BadRequest(f"max_tokens must be a positive integer, got {max_tokens!r}")
        if n_in + max_tokens > mml:
            raise BadRequest(
                f"This model's maximum context length is {mml} tokens. However, you requested "
                f"{n_in + max_tokens} tokens ({n_in} in the messages, {max_tokens} in the completion). "
                "Please reduce the length of the messages or completion."
            )
        return n_in, max_tokens

    async def _serve(self, request: web.Request, chat: bool) -> web.StreamResponse:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error("request body must be JSON", 400)
        if not isinstance(body, dict):
            return _error("request body must be a JSON object", 400)
        try:
            n_in, n_out = self._admit(body, chat)
        except BadRequest as e:
            return _error(str(e), e.status)
        if self.faults.http500_rate and self.rng.random() < self.faults.http500_rate:
            return _error("Internal server error (injected fault)", 500)
        self.accepted += 1
        self.faults.on_request(self.accepted, self.live)
        stall_at = n_out // 2 if n_out >= 2 and self.faults.stalls(self.accepted) else None
        self.metrics.prompt_tokens += n_in
        st = self.live.submit(n_in, n_out)
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        model = body.get("model") or self.names[0]
        try:
            if body.get("stream"):
                opts = body.get("stream_options") or {}
                return await self._stream(request, st, rid, model, chat, n_in, n_out,
                                          bool(opts.get("include_usage")), stall_at)
            return await self._whole(st, rid, model, chat, n_in, n_out, stall_at)
        finally:
            self.live.abort(st)

    async def _tokens(self, st: Stream, stall_at: int | None):  # type: ignore[no-untyped-def]
        """Yield token counts as the engine produces them; hang forever at a stall point."""
        got = 0
        while True:
            k = await st.queue.get()
            if k < 0:
                return
            if stall_at is not None and got + k >= stall_at:
                if stall_at > got:
                    yield stall_at - got
                await asyncio.Event().wait()  # the stream stalls: never another byte
            got += k
            yield k

    async def _whole(self, st: Stream, rid: str, model: str, chat: bool, n_in: int, n_out: int,
                     stall_at: int | None) -> web.Response:
        n = 0
        async for k in self._tokens(st, stall_at):
            n += k
        text = WORD * n
        usage = {"prompt_tokens": n_in, "completion_tokens": n, "total_tokens": n_in + n}
        if chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}
            obj = "chat.completion"
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": "length"}
            obj = "text_completion"
        return web.json_response({"id": rid, "object": obj, "created": int(time.time()), "model": model,
                                  "choices": [choice], "usage": usage})

    async def _stream(self, request: web.Request, st: Stream, rid: str, model: str, chat: bool, n_in: int,
                      n_out: int, include_usage: bool, stall_at: int | None) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        created = int(time.time())
        obj = "chat.completion.chunk" if chat else "text_completion"

        async def send(choices: list[dict[str, Any]], usage: dict[str, int] | None = None) -> None:
            chunk: dict[str, Any] = {"id": rid, "object": obj, "created": created, "model": model, "choices": choices}
            if usage is not None:
                chunk["usage"] = usage
            await resp.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")

        if chat:
            await send([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
        n = 0
        async for k in self._tokens(st, stall_at):
            n += k
            fin = "length" if n >= n_out else None
            text = WORD * k
            if chat:
                await send([{"index": 0, "delta": {"content": text}, "finish_reason": fin}])
            else:
                await send([{"index": 0, "text": text, "logprobs": None, "finish_reason": fin}])
        if include_usage:
            await send([], {"prompt_tokens": n_in, "completion_tokens": n, "total_tokens": n_in + n})
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp


def _parser(flavour: str | None) -> argparse.ArgumentParser:
    from tuner.common.prog import prog

    ap = argparse.ArgumentParser(prog=prog("sim"), description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--served-model-name", nargs="+", default=None)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--flavour", choices=FLAVOURS, default="vllm")
    ap.add_argument("--gpu", default="H200")
    ap.add_argument("--shape", default=None, help="model shape; default: derived from --model")
    ap.add_argument("--max-model-len", "--context-length", dest="max_model_len", type=int, default=None)
    ap.add_argument("--tensor-parallel-size", "--tp-size", dest="tensor_parallel_size", type=int, default=1)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--time-scale", type=float, default=1.0, help="virtual seconds per wall second")
    ap.add_argument("--host-launch", type=float, default=1.0, help="x the calibrated prompt-step launch (tuner.sim.host)")
    ap.add_argument("--host-step", type=float, default=1.0, help="x the calibrated fixed step time (tuner.sim.host)")
    add_fault_flags(ap)
    if flavour is not None:
        for name, kind in knobs(flavour).items():
            flag = "--" + name.replace("_", "-")
            if flag in ap._option_string_actions:  # layout flags (--tensor-parallel-size, --tp-size) above
                continue
            extra = ["--kv-cache-memory"] if name == "kv_cache_memory_bytes" else []
            if kind is bool:
                ap.add_argument(flag, *extra, dest=name, action=argparse.BooleanOptionalAction, default=None)
            else:  # a dict knob (--speculative-config) is one JSON value, as on the real engines
                ap.add_argument(flag, *extra, dest=name, type=json.loads if kind is dict else kind, default=None)
    return ap


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    pre, _ = _parser(None).parse_known_args(argv)
    a = _parser(pre.flavour).parse_args(argv)
    faults = Faults.from_args(a)
    faults.at_start()
    args = {k: getattr(a, k) for k in knobs(a.flavour) if getattr(a, k, None) is not None}
    try:
        shape = a.shape or shape_for(a.model)
        from tuner.sim.catalog import get_shape

        mml = a.max_model_len or get_shape(shape).max_position
        from tuner.sim.calibration import FITTED
        from tuner.sim.host import apply_host

        engine = SimulatedEngine(flavour=a.flavour, gpu=a.gpu, shape=shape, args=args, max_model_len=mml,
                                 tensor_parallel_size=a.tensor_parallel_size, dtype=a.dtype,
                                 calibration=apply_host(FITTED, a.host_launch, a.host_step))
    except EngineStartError as e:
        print(e.reason, file=sys.stderr, flush=True)
        sys.exit(1)
    except SpecError as e:
        print(f"ValueError: {e}", file=sys.stderr, flush=True)
        sys.exit(1)
    r = engine.resolved
    print(f"INFO sim engine ({a.flavour}-style) {r['shape']} on {r['gpu']} x{r['tensor_parallel_size']}, "
          f"non-default args: {args}", flush=True)
    print(f"INFO GPU KV cache size: {r['kv_capacity_tokens']:,} tokens", flush=True)
    names = a.served_model_name or [a.model]
    server = SimServer(engine, names, a.model, a.flavour, a.time_scale, faults)
    print(f"INFO Starting server on http://{a.host}:{a.port} (pid {os.getpid()})", flush=True)
    web.run_app(server.app(), host=a.host, port=a.port, print=None, access_log=None, handle_signals=True,
                shutdown_timeout=1.0, handler_cancellation=True)  # a client that goes away aborts its request


if __name__ == "__main__":
    main()
