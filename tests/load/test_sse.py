"""The SSE parser on the byte splits real sockets produce."""

from __future__ import annotations

import json

from tuner.load.sse import SSEParser

STREAM = (
    b'data: {"choices":[{"text":"a"}]}\n\n'
    b": keep-alive comment\n\n"
    b'event: message\ndata: {"choices":[{"text":"b"}]}\n\n'
    b"data: line1\ndata: line2\n\n"
    b"data: [DONE]\n\n"
)
EXPECTED = [b'{"choices":[{"text":"a"}]}', b'{"choices":[{"text":"b"}]}', b"line1\nline2", b"[DONE]"]


def feed_all(stream: bytes, size: int) -> list[bytes]:
    p = SSEParser()
    out: list[bytes] = []
    for i in range(0, len(stream), size):
        out += p.feed(stream[i:i + size])
    return out + p.close()


def test_every_split_gives_the_same_events() -> None:
    for size in (1, 2, 3, 7, 16, len(STREAM)):
        assert feed_all(STREAM, size) == EXPECTED, size


def test_crlf_and_cr_line_ends_split_anywhere() -> None:
    for sep in (b"\r\n", b"\r"):
        stream = STREAM.replace(b"\n", sep)
        for size in (1, 2, 5, len(stream)):
            assert feed_all(stream, size) == EXPECTED, (sep, size)


def test_data_without_space_and_unterminated_last_event() -> None:
    p = SSEParser()
    assert p.feed(b'data:{"x":1}\n\ndata: tail') == [b'{"x":1}']
    assert p.close() == [b"tail"]
    assert json.loads(b'{"x":1}') == {"x": 1}
