"""The one Server-Sent Events parser, for /v1/completions and /v1/chat/completions streams alike.

Incremental: feed it whatever bytes the socket gave; it returns the `data` payload of every event
completed so far. Handles LF, CRLF and CR line ends split across reads, multi-line data, comments.
"""

from __future__ import annotations


class SSEParser:
    __slots__ = ("_buf", "_data")

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        """Data payloads of the events completed by `chunk` (in order)."""
        buf = self._buf + chunk if self._buf else chunk
        if b"\r" in buf:
            hold = buf.endswith(b"\r")  # a CR may be the first half of a CRLF split across reads
            if hold:
                buf = buf[:-1]
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            if hold:
                buf += b"\r"
        lines = buf.split(b"\n")
        self._buf = lines.pop()
        events: list[bytes] = []
        data = self._data
        for line in lines:
            if not line:
                if data:
                    events.append(data[0] if len(data) == 1 else b"\n".join(data))
                    data = self._data = []
            elif line.startswith(b"data:"):
                value = line[5:]
                data.append(value[1:] if value.startswith(b" ") else value)
            # other fields (event:, id:, retry:) and comments (":...") carry nothing we use
        return events

    def close(self) -> list[bytes]:
        """Events left when the stream ends without a final blank line."""
        events = self.feed(b"\n\n") if self._buf.strip(b"\r") or self._data else []
        self._buf, self._data = b"", []
        return events
