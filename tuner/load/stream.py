"""Reading one OpenAI-style token stream (completions or chat) cheaply and timing it right.

`StreamReader.feed(bytes, now)` runs the SSE parser and classifies each event. A chunk that carries
text (`choices[0].text`, or `delta.content` / `reasoning_content` / `reasoning`) is a streamed
token, found by a byte pattern instead of a JSON parse (the hot path: one event per token); events
with `usage` or `error` are parsed as JSON. An empty chat text (e.g. chat's first, role-only chunk) is
no token. An empty completions text with no finish reason is one: vLLM streams a chunk per generated
token, and its text is empty where the token decodes to nothing yet (a character split across tokens,
a skipped special token, or a dummy-weight model's ids past the tokenizer's vocabulary); without it a
stream of such tokens read as having no first token at all (a Qwen3-1.7B server on the H100, 2026-12-06).

Timestamps come from the caller: tuner.load.http1 stamps each socket read when the event loop
gets it, before any parsing, so the parser's cost never lands in a token's time.
"""

from __future__ import annotations

import json
import re
from collections.abc import MutableSequence

from tuner.load.sse import SSEParser

_TEXT = re.compile(rb'"(?:text|content|reasoning_content|reasoning)"\s*:\s*"(?!")')
_EMPTY_TEXT = re.compile(rb'"text"\s*:\s*""')  # a completions chunk whose token decoded to no text (yet)
_OPEN = re.compile(rb'"finish_reason"\s*:\s*null')  # ... and is not a closing chunk
_PARSE = re.compile(rb'"usage"\s*:\s*\{|"error"|"object"\s*:\s*"error"')


class StreamReader:
    __slots__ = ("done", "done_at", "error", "first", "parser", "times", "usage_tokens")

    def __init__(self, times: MutableSequence[float]) -> None:
        self.parser = SSEParser()
        self.times = times
        self.first: float | None = None
        self.usage_tokens: int | None = None
        self.error: str | None = None
        self.done = False
        self.done_at: float | None = None  # time of the read that carried [DONE]

    def feed(self, chunk: bytes, now: float) -> None:
        for data in self.parser.feed(chunk):
            self._event(data, now)

    def close(self, now: float) -> None:
        for data in self.parser.close():
            self._event(data, now)

    def _event(self, data: bytes, now: float) -> None:
        if data == b"[DONE]":
            self.done = True
            self.done_at = now
            return
        if _TEXT.search(data) is not None or (_EMPTY_TEXT.search(data) is not None and _OPEN.search(data) is not None):
            if self.first is None:
                self.first = now
            self.times.append(now)
        if _PARSE.search(data) is None:
            return
        try:
            obj = json.loads(data)
        except ValueError:
            self.error = f"bad stream chunk: {data[:80]!r}"
            return
        if not isinstance(obj, dict):
            return
        usage = obj.get("usage")
        if isinstance(usage, dict) and usage.get("completion_tokens") is not None:
            self.usage_tokens = int(usage["completion_tokens"])
        if "error" in obj or obj.get("object") == "error":
            err = obj.get("error", obj)
            msg = err.get("message", err) if isinstance(err, dict) else err
            self.error = f"stream error: {msg}"[:200]
