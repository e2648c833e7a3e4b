"""The load generator's HTTP/1.1 client against real sockets: framing split anywhere, keep-alive, errors."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from tuner.load.http1 import KERNEL_STAMPS, Client, Clock, ConnectError, HttpError

EVENTS = [f'data: {{"choices":[{{"text":" t{i}"}}]}}\n\n'.encode() for i in range(5)] + [b"data: [DONE]\n\n"]


def chunked(parts: list[bytes], trailer: bytes = b"") -> bytes:
    return b"".join(f"{len(p):x}\r\n".encode() + p + b"\r\n" for p in parts) + b"0\r\n" + trailer + b"\r\n"


async def raw_server(responses: Callable[[int], bytes], *, close_after: bool = False, split: int = 0) -> Any:
    """A real TCP server answering the n-th request with responses(n), written in pieces of `split` bytes."""
    count = [0]

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                await reader.readexactly(length)
                data = responses(count[0])
                count[0] += 1
                if split:
                    for i in range(0, len(data), split):
                        writer.write(data[i:i + split])
                        await writer.drain()
                        await asyncio.sleep(0.0005)
                else:
                    writer.write(data)
                await writer.drain()
                if close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"


def run(coro: Any) -> Any:
    return asyncio.run(coro)


CLOCKS = ["auto", "user"]  # kernel receive stamps (recvmsg) where the platform has them; the transport path


@pytest.mark.parametrize("clock", CLOCKS)
@pytest.mark.parametrize("split", [1, 3, 7])
def test_chunked_stream_split_anywhere_reaches_the_consumer_whole(split: int, clock: Clock) -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    body = chunked(EVENTS, trailer=b"X-Trailer: 1\r\n") if split == 7 else chunked(EVENTS)

    async def go() -> tuple[bytes, list[float], Any, Client]:
        server, url = await raw_server(lambda n: head + body, split=split)
        client = Client(url, clock=clock)
        got: list[bytes] = []
        times: list[float] = []
        sent: list[float] = []
        try:
            resp = await client.request("POST", "/v1/completions", body=b"{}",
                                        on_body=lambda d, t, s: (got.append(d), times.append(t)),
                                        on_sent=sent.append)
            again = await client.request("POST", "/v1/completions", body=b"{}", on_body=lambda d, t, s: None)
        finally:
            client.close()
            server.close()
        assert again.status == 200
        return b"".join(got), [sent[0], *times], resp, client

    data, times, resp, client = run(go())
    connects = client.connects
    assert client.kernel_reads == (client.reads if clock == "auto" and KERNEL_STAMPS else 0) and client.reads >= 2
    assert resp.status == 200 and data == b"".join(EVENTS)
    assert times == sorted(times)  # sent, then every read in order
    assert connects == 1  # the second request reused the connection


@pytest.mark.parametrize("clock", CLOCKS)
def test_content_length_error_body_and_keep_alive_race(clock: Clock) -> None:
    err = json.dumps({"object": "error", "message": "bad"}).encode()

    def answer(n: int) -> bytes:
        return b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\n\r\n" % len(err) + err

    async def go() -> tuple[list[Any], int]:
        # the server closes every connection after answering, without saying so: a reused idle
        # connection is dead, and the request goes once more on a new one
        server, url = await raw_server(answer, close_after=True)
        client = Client(url, clock=clock)
        try:
            out = []
            for _ in range(3):
                out.append(await client.request("POST", "/x", body=b"{}"))
                await asyncio.sleep(0.01)
        finally:
            client.close()
            server.close()
        return out, client.connects

    out, connects = run(go())
    assert [r.status for r in out] == [400] * 3 and all(r.body == err for r in out)
    assert connects == 3


@pytest.mark.parametrize("clock", CLOCKS)
def test_refused_and_cut_responses_raise(clock: Clock) -> None:
    async def refused() -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        await Client(f"http://127.0.0.1:{port}", clock=clock).request("GET", "/")

    with pytest.raises(ConnectError, match="cannot connect"):
        run(refused())

    async def cut() -> None:
        head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        server, url = await raw_server(lambda n: head + b"5\r\nab", close_after=True)
        try:
            await Client(url, clock=clock).request("POST", "/", on_body=lambda d, t, s: None)
        finally:
            server.close()

    with pytest.raises(HttpError, match="mid-response"):
        run(cut())

    with pytest.raises(ValueError, match="http"):
        Client("ftp://example.org")


@pytest.mark.skipif(not KERNEL_STAMPS, reason="kernel receive stamps: Linux only")
def test_kernel_stamps_keep_arrival_times_while_the_loop_is_blocked() -> None:
    """A server thread writes an event; the client's first read of it blocks the event loop for
    200 ms, and meanwhile the server writes two more, 20 ms apart. The stamps are when the bytes
    arrived (within 5 ms of each write), not when the loop got round to them (150 ms and more
    later); the two later events share one read, whose span reaches back past the earlier one."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    writes: list[float] = []
    blocked = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.recv(65536)
            for i, event in enumerate(EVENTS[:3]):
                if i == 1:
                    blocked.wait(5)
                elif i == 2:
                    time.sleep(0.02)
                # the last event goes out with the stream's end in one write: a read's stamp is its last
                # packet's, and a busy machine can hold this thread between two writes for tens of ms
                data = (head if i == 0 else b"") + (chunked([event]) if i == 2 else chunked([event])[:-5])
                writes.append(time.perf_counter())
                conn.sendall(data)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    reads: list[tuple[float, float, float]] = []  # (stamp, span, when the loop handed it over)

    def on_body(data: bytes, t: float, span: float) -> None:
        reads.append((t, span, time.perf_counter()))
        if len(reads) == 1:
            blocked.set()
            time.sleep(0.2)  # the loop does nothing else meanwhile

    async def go() -> Client:
        client = Client(f"http://127.0.0.1:{listener.getsockname()[1]}")
        try:
            await client.request("POST", "/v1/completions", body=b"{}", on_body=on_body)
        finally:
            client.close()
        return client

    client = run(go())
    thread.join(5)
    listener.close()
    assert client.kernel_reads == client.reads >= 2
    assert len(writes) == 3 and len(reads) == 2, (writes, reads)
    assert abs(reads[0][0] - writes[0]) < 0.005
    assert abs(reads[1][0] - writes[2]) < 0.005, (writes, reads)  # the later event's arrival ...
    assert reads[1][2] - reads[1][0] > 0.1  # ... though the loop got it 100+ ms later
    assert reads[1][0] - reads[1][1] <= writes[1]  # the read's span reaches back past the earlier event
