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


def test_stream_reader_classifies_events_like_a_json_parse() -> None:
    from tuner.load.stream import StreamReader

    events = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},  # chat role chunk: no token
        {"choices": [{"index": 0, "delta": {"content": "Hi"}}]},
        {"choices": [{"index": 0, "delta": {"reasoning_content": "hmm", "content": None}}]},
        {"choices": [{"index": 0, "text": "\"quoted\"", "logprobs": None, "finish_reason": None}]},
        {"choices": [{"index": 0, "text": "", "finish_reason": "length"}], "usage": None},  # closing: no token
        # a token that decoded to no text yet (vLLM still streams its chunk): a token
        {"choices": [{"index": 0, "text": "", "logprobs": None, "finish_reason": None, "stop_reason": None}]},
        {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 7, "total_tokens": 10}},
    ]
    for sep in ((",", ":"), (", ", ": ")):  # vLLM's compact JSON and Python's default spacing
        stream = b"".join(b"data: " + json.dumps(e, separators=sep).encode() + b"\n\n" for e in events)
        times: list[float] = []
        r = StreamReader(times)
        for i in range(0, len(stream), 5):
            r.feed(stream[i:i + 5], float(i))
        r.feed(b"data: [DONE]\n\n", 1e6)
        assert len(times) == 4 and r.first == times[0] and r.usage_tokens == 7 and r.done and r.error is None


def test_a_stream_of_tokens_without_text_is_timed() -> None:
    """vLLM streams one chunk per token even when the token decodes to no text (here every one: a dummy-weight
    Qwen3-1.7B on the H100 sampled ids past its tokenizer's vocabulary). Before, such a stream read as having no first
    token and no token times, though it finished with every token (usage)."""
    from tuner.load.stream import StreamReader

    chunk = b'data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,' \
            b'"text":"","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}\n\n'
    last = b'data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,' \
           b'"text":"","logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":null}\n\n'
    times: list[float] = []
    r = StreamReader(times)
    for k in range(5):
        r.feed(chunk, 0.1 * (k + 1))
    r.feed(last, 0.6)
    r.feed(b"data: [DONE]\n\n", 0.7)
    assert r.first == 0.1 and times == [0.1, 0.2, 0.30000000000000004, 0.4, 0.5] and r.done


def test_stream_reader_reports_errors() -> None:
    from tuner.load.stream import StreamReader

    r = StreamReader([])
    r.feed(b'data: {"object": "error", "message": "KV cache full", "code": 500}\n\n', 0.0)
    assert r.error == "stream error: KV cache full" and not r.done
    r = StreamReader([])
    r.feed(b'data: {"error": {"message": "boom"}}\n\n', 0.0)
    assert r.error == "stream error: boom"
