"""A small HTTP/1.1 client built for one job: send a request and time every read of its response.

Why not aiohttp for the streams: there every read wakes the request's task, and the task takes the
time when it runs, after every other stream that got data in the same loop pass, so the timestamp
grows with the number of streams and the client's per-chunk cost. Here the protocol's
`data_received` only takes the time and queues the bytes (about a microsecond); one callback then
parses everything read in that pass. A read's timestamp is the moment the event loop got it from
the socket, and parsing cost no longer lands in any timestamp.

Plain HTTP/1.1 with keep-alive, `Content-Length`, chunked and close-delimited bodies, TLS through
an `ssl` context for https URLs. A request on a reused connection that the server closed before
answering is retried once on a new connection (keep-alive race).
"""

from __future__ import annotations

import asyncio
import ssl as _ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

OnBody = Callable[[bytes, float], None]
MAX_ERROR_BODY = 64 * 1024
_perf = time.perf_counter


class HttpError(Exception):
    """Connection reset, or a response that is not HTTP/1.x."""


class ConnectError(HttpError):
    """No connection: refused, unreachable, name not resolved."""


@dataclass
class Response:
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""  # the whole body when no `on_body` consumer was given (capped for errors)
    first_byte_s: float | None = None  # perf_counter of the first read of this response


class _Reads:
    """Per loop: reads queued with their arrival time, parsed in one callback per loop pass."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.queue: list[tuple[float, _Conn, bytes | None]] = []
        self.reads = 0
        self.busy_s = 0.0  # wall time spent parsing reads: near the window's length, the client is saturated

    def push(self, conn: _Conn, data: bytes | None) -> None:
        if not self.queue:
            self.loop.call_soon(self.drain)
        self.queue.append((_perf(), conn, data))

    def drain(self) -> None:
        q, self.queue = self.queue, []
        self.reads += len(q)
        for t, conn, data in q:
            if data is None:
                conn.ended()
            else:
                conn.feed(data, t)
        self.busy_s += _perf() - q[0][0]


class _Conn(asyncio.Protocol):
    def __init__(self, reads: _Reads) -> None:
        self.reads = reads
        self.transport: asyncio.Transport | None = None
        self.buf = b""
        self.closed = False
        self.used = 0  # requests sent on this connection
        self.ex: _Exchange | None = None

    # -- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.reads.push(self, data)

    def eof_received(self) -> bool:
        self.reads.push(self, None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.ex is not None:
            self.reads.push(self, None)

    # -- parsing (from _Reads.drain)
    def feed(self, data: bytes, t: float) -> None:
        ex = self.ex
        if ex is None:  # bytes nobody asked for: the connection cannot be trusted any more
            self.abort()
            return
        if ex.response.first_byte_s is None:
            ex.response.first_byte_s = t
        self.buf = self.buf + data if self.buf else data
        try:
            ex.parse(self, t)
        except (ValueError, IndexError) as exc:
            self.fail(HttpError(f"bad HTTP response: {exc}"))

    def ended(self) -> None:
        self.closed = True
        ex = self.ex
        if ex is None:
            return
        if ex.mode == "close" and ex.state == "body":
            ex.finish(self, keep=False)
        else:
            self.fail(HttpError("server closed the connection" + (" before answering" if ex.state == "head"
                                                                 else " mid-response")))

    def fail(self, exc: BaseException) -> None:
        ex, self.ex = self.ex, None
        self.abort()
        if ex is not None and not ex.done.done():
            ex.done.set_exception(exc)

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


class _Exchange:
    """One request/response on a connection: the response parser's state."""

    __slots__ = ("done", "limit", "mode", "need", "on_body", "response", "state")

    def __init__(self, loop: asyncio.AbstractEventLoop, on_body: OnBody | None) -> None:
        self.done: asyncio.Future[Response] = loop.create_future()
        self.on_body = on_body
        self.response = Response()
        self.state = "head"  # head -> body -> (done)
        self.mode = ""  # chunked | length | close
        self.need = -1  # chunked: bytes left in this chunk (-1: reading a size line); length: bytes left
        self.limit = MAX_ERROR_BODY

    def parse(self, conn: _Conn, t: float) -> None:
        if self.state == "head":
            end = conn.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(conn.buf) > 65536:
                    raise ValueError("response head over 64 KiB")
                return
            head, conn.buf = conn.buf[:end].decode("latin-1"), conn.buf[end + 4:]
            lines = head.split("\r\n")
            version, _, rest = lines[0].partition(" ")
            if not version.startswith("HTTP/1."):
                raise ValueError(f"not HTTP/1.x: {lines[0][:60]!r}")
            r = self.response
            r.status = int(rest[:3])
            for line in lines[1:]:
                k, _, v = line.partition(":")
                r.headers[k.strip().lower()] = v.strip()
            if r.status != 200 or self.on_body is None:
                self.limit = MAX_ERROR_BODY if r.status != 200 else 1 << 30
                self.on_body = None
            te = r.headers.get("transfer-encoding", "").lower()
            if "chunked" in te:
                self.mode = "chunked"
            elif "content-length" in r.headers:
                self.mode, self.need = "length", int(r.headers["content-length"])
            elif r.status in (204, 304) or 100 <= r.status < 200:
                self.mode, self.need = "length", 0
            else:
                self.mode = "close"
            self.state = "body"
        if self.mode == "chunked":
            self._chunked(conn, t)
        elif self.mode == "length":
            take, conn.buf = conn.buf[:self.need], conn.buf[self.need:]
            self.need -= len(take)
            if take:
                self._body(take, t)
            if self.need == 0:
                self.finish(conn, keep=True)
        else:
            take, conn.buf = conn.buf, b""
            if take:
                self._body(take, t)

    def _chunked(self, conn: _Conn, t: float) -> None:
        """De-frame what is buffered (the hot path: one call per read, locals only in the loop)."""
        buf = conn.buf
        end_buf = len(buf)
        out: list[bytes] = []
        pos, need = 0, self.need
        while True:
            if need < 0:
                nl = buf.find(b"\r\n", pos)
                if nl < 0:
                    break
                line = buf[pos:nl]
                size = int(line if b";" not in line else line.split(b";", 1)[0], 16)
                if size == 0:  # last chunk; optional trailers end with an empty line
                    if buf[nl + 2:nl + 4] == b"\r\n":
                        pos = nl + 4
                    else:
                        end = buf.find(b"\r\n\r\n", nl)
                        if end < 0:
                            break
                        pos = end + 4
                    self.need = -1
                    if out:
                        self._body(b"".join(out), t)
                    conn.buf = buf[pos:]
                    self.finish(conn, keep=True)
                    return
                need, pos = size, nl + 2
            avail = end_buf - pos
            if avail <= 0:
                break
            if need > 0:
                take = need if need < avail else avail
                out.append(buf[pos:pos + take])
                pos += take
                need -= take
            if need == 0:
                if end_buf - pos < 2:
                    break
                pos += 2  # CRLF after the chunk data
                need = -1
        self.need = need
        conn.buf = buf[pos:] if pos else buf
        if out:
            self._body(out[0] if len(out) == 1 else b"".join(out), t)

    def _body(self, data: bytes, t: float) -> None:
        if self.on_body is not None:
            self.on_body(data, t)
        elif len(self.response.body) < self.limit:
            self.response.body += data[:self.limit - len(self.response.body)]

    def finish(self, conn: _Conn, keep: bool) -> None:
        conn.ex = None
        if not keep or self.response.headers.get("connection", "").lower() == "close":
            conn.abort()
        if not self.done.done():
            self.done.set_result(self.response)


class Client:
    """Connection pool for one origin (scheme://host:port). Use inside one event loop."""

    def __init__(self, base_url: str, *, ssl_context: _ssl.SSLContext | None = None) -> None:
        u = urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"need an http(s) URL, got {base_url!r}")
        self.host = u.hostname
        self.port = u.port or (443 if u.scheme == "https" else 80)
        self.ssl = (ssl_context or _ssl.create_default_context()) if u.scheme == "https" else None
        default = 443 if u.scheme == "https" else 80
        name = f"[{self.host}]" if ":" in self.host else self.host  # an IPv6 literal
        self.host_header = name if self.port == default else f"{name}:{self.port}"
        self.idle: list[_Conn] = []
        self.connects = 0  # connections opened so far
        self._reads: _Reads | None = None

    @property
    def reads(self) -> int:
        return self._reads.reads if self._reads else 0

    @property
    def busy_s(self) -> float:
        """Seconds from each loop pass's first read to the end of its parsing, summed."""
        return self._reads.busy_s if self._reads else 0.0

    async def _connect(self) -> _Conn:
        loop = asyncio.get_running_loop()
        if self._reads is None:
            self._reads = _Reads(loop)
        reads = self._reads
        try:
            _, conn = await loop.create_connection(lambda: _Conn(reads), self.host, self.port, ssl=self.ssl)
        except OSError as exc:
            raise ConnectError(f"cannot connect to {self.host}:{self.port}: {exc.strerror or exc}") from exc
        self.connects += 1
        return conn

    async def warm(self, n: int) -> None:
        """Open connections until `n` are idle in the pool (so the measured window opens none)."""
        missing = n - len([c for c in self.idle if not c.closed])
        if missing > 0:
            got = await asyncio.gather(*(self._connect() for _ in range(missing)), return_exceptions=True)
            self.idle.extend(c for c in got if isinstance(c, _Conn))

    def close(self) -> None:
        for c in self.idle:
            c.abort()
        self.idle.clear()

    def head(self, method: str, path: str, headers: dict[str, str], body: bytes) -> bytes:
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self.host_header}", f"Content-Length: {len(body)}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def request(self, method: str, path: str, *, body: bytes = b"", headers: dict[str, str] | None = None,
                      on_body: OnBody | None = None, on_sent: Callable[[float], None] | None = None,
                      prepared: bytes | None = None) -> Response:
        """Send and wait for the whole response. `on_body(bytes, perf_counter at read)` gets the body
        of a 200 response as it arrives; `on_sent(perf_counter)` is called right before the bytes are
        written. `prepared` is head + body built in advance (`head(...) + body`)."""
        data = prepared if prepared is not None else self.head(method, path, headers or {}, body) + body
        for attempt in (0, 1):
            conn = None
            while self.idle:
                c = self.idle.pop()
                if not c.closed and c.transport is not None and not c.transport.is_closing():
                    conn = c
                    break
            reused = conn is not None
            if conn is None:
                conn = await self._connect()
            ex = _Exchange(asyncio.get_running_loop(), on_body)
            conn.ex = ex
            conn.used += 1
            assert conn.transport is not None
            if on_sent is not None:
                on_sent(_perf())
            conn.transport.write(data)
            try:
                resp = await ex.done
            except HttpError:
                if reused and attempt == 0 and ex.response.first_byte_s is None:
                    continue  # the server dropped an idle keep-alive connection: once more on a new one
                raise
            except BaseException:
                conn.ex = None
                conn.abort()
                raise
            if not conn.closed and conn.ex is None:
                self.idle.append(conn)
            return resp
        raise AssertionError("unreachable")
