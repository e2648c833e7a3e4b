"""The load generator's HTTP/1.1 client against real sockets: framing split anywhere, keep-alive, errors."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable
from typing import Any

import pytest

from tuner.load.http1 import Client, ConnectError, HttpError

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


@pytest.mark.parametrize("split", [1, 3, 7])
def test_chunked_stream_split_anywhere_reaches_the_consumer_whole(split: int) -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    body = chunked(EVENTS, trailer=b"X-Trailer: 1\r\n") if split == 7 else chunked(EVENTS)

    async def go() -> tuple[bytes, list[float], Any, int]:
        server, url = await raw_server(lambda n: head + body, split=split)
        client = Client(url)
        got: list[bytes] = []
        times: list[float] = []
        sent: list[float] = []
        try:
            resp = await client.request("POST", "/v1/completions", body=b"{}",
                                        on_body=lambda d, t: (got.append(d), times.append(t)),
                                        on_sent=sent.append)
            again = await client.request("POST", "/v1/completions", body=b"{}", on_body=lambda d, t: None)
        finally:
            client.close()
            server.close()
        assert again.status == 200
        return b"".join(got), [sent[0], *times], resp, client.connects

    data, times, resp, connects = run(go())
    assert resp.status == 200 and data == b"".join(EVENTS)
    assert times == sorted(times)  # sent, then every read in order
    assert connects == 1  # the second request reused the connection


def test_content_length_error_body_and_keep_alive_race() -> None:
    err = json.dumps({"object": "error", "message": "bad"}).encode()

    def answer(n: int) -> bytes:
        return b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\n\r\n" % len(err) + err

    async def go() -> tuple[list[Any], int]:
        # the server closes every connection after answering, without saying so: a reused idle
        # connection is dead, and the request goes once more on a new one
        server, url = await raw_server(answer, close_after=True)
        client = Client(url)
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


def test_refused_and_cut_responses_raise() -> None:
    async def refused() -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        await Client(f"http://127.0.0.1:{port}").request("GET", "/")

    with pytest.raises(ConnectError, match="cannot connect"):
        run(refused())

    async def cut() -> None:
        head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        server, url = await raw_server(lambda n: head + b"5\r\nab", close_after=True)
        try:
            await Client(url).request("POST", "/", on_body=lambda d, t: None)
        finally:
            server.close()

    with pytest.raises(HttpError, match="mid-response"):
        run(cut())

    with pytest.raises(ValueError, match="http"):
        Client("ftp://example.org")
