"""A bare streaming server, one blocking thread per connection: the send side's reference.

aiohttp's own path (event loop, parser, dispatch) takes 1-5 ms on a small VM before a handler
runs, so the fake server's arrival stamp is late by that much; here a request is stamped as the
blocking `recv` that completed it returns (0.2 ms on the same VM). Each POST gets its tokens at once
as a chunked SSE stream; GET /log returns {X-Request-Id: arrival perf_counter}.
Run: `python raw_server.py [--tokens N]`; prints `PORT <n>`.
"""

from __future__ import annotations

import argparse
import json
import socket
import threading
import time

LOG: dict[str, float] = {}


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def _read_request(conn: socket.socket, buf: bytes) -> tuple[bytes, bytes, float] | None:
    """(head, rest of the buffer, perf_counter when its last byte came), or None at EOF."""
    stamp = time.perf_counter()
    while b"\r\n\r\n" not in buf:
        data = conn.recv(65536)
        if not data:
            return None
        stamp, buf = time.perf_counter(), buf + data
    head, _, rest = buf.partition(b"\r\n\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(rest) < length:
        data = conn.recv(65536)
        if not data:
            return None
        stamp, rest = time.perf_counter(), rest + data
    return head, rest[length:], stamp


def serve(conn: socket.socket, tokens: int) -> None:
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = b""
    with conn:
        while (got := _read_request(conn, buf)) is not None:
            head, buf, stamp = got
            lines = head.decode("latin-1").split("\r\n")
            headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
            if lines[0].startswith("GET /log"):
                body = json.dumps(LOG).encode()
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
                continue
            rid = headers.get("x-request-id", "")
            LOG[rid] = stamp
            out = [b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"]
            for i in range(tokens):
                event = {"id": rid, "object": "chunk", "choices": [{"index": 0, "text": f" t{i}", "finish_reason": None}]}
                out.append(_chunk(f"data: {json.dumps(event)}\n\n".encode()))
            usage = {"prompt_tokens": 1, "completion_tokens": tokens, "total_tokens": tokens + 1}
            out.append(_chunk(f"data: {json.dumps({'id': rid, 'choices': [], 'usage': usage})}\n\n".encode()))
            out.append(_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
            conn.sendall(b"".join(out))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--tokens", type=int, default=4)
    args = p.parse_args()
    srv = socket.create_server(("127.0.0.1", 0), backlog=256)
    print(f"PORT {srv.getsockname()[1]}", flush=True)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn, args.tokens), daemon=True).start()


if __name__ == "__main__":
    main()
