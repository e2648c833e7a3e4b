"""Smoke test of a deployed app: one streaming chat completion through the Serve HTTP proxy.

Passing means: HTTP 200, an event stream, at least one content delta, and the closing ``[DONE]``.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass


class SmokeTestError(Exception):
    """The app did not answer a streaming chat completion properly."""


@dataclass
class SmokeResult:
    url: str
    ttft_s: float
    total_s: float
    chunks: int
    text: str
    backend: str | None = None  # which side of a failover router answered (x-servetune-backend)


def chat_url(http_base: str, route_prefix: str) -> str:
    prefix = route_prefix.rstrip("/")
    return f"{http_base.rstrip('/')}{prefix}/v1/chat/completions"


def smoke_test(http_base: str, route_prefix: str, model: str, *, max_tokens: int = 8,
               timeout_s: float = 120) -> SmokeResult:
    """Stream one chat completion; raise SmokeTestError saying what was wrong."""
    url = chat_url(http_base, route_prefix)
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "servetune smoke test: say hello"}],
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
    t0 = time.monotonic()
    first: float | None = None
    chunks, text, done = 0, [], False
    backend: str | None = None
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            media = resp.headers.get("Content-Type", "")
            backend = resp.headers.get("x-servetune-backend")
            if "text/event-stream" not in media:
                raise SmokeTestError(f"{url}: expected an event stream, got Content-Type {media!r}")
            for raw in resp:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    done = True
                    break
                delta = _delta(url, payload)
                if delta:
                    first = first if first is not None else time.monotonic()
                    chunks += 1
                    text.append(delta)
    except urllib.error.HTTPError as exc:
        detail = exc.read()[:300].decode("utf-8", "replace")
        raise SmokeTestError(f"{url}: HTTP {exc.code}: {detail}") from exc
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        raise SmokeTestError(f"{url}: {type(exc).__name__}: {exc}") from exc
    if not chunks:
        raise SmokeTestError(f"{url}: the stream carried no content")
    if not done:
        raise SmokeTestError(f"{url}: the stream ended without [DONE] after {chunks} chunk(s)")
    assert first is not None
    return SmokeResult(url, first - t0, time.monotonic() - t0, chunks, "".join(text), backend)


def _delta(url: str, payload: str) -> str:
    try:
        data = json.loads(payload)
    except json.JSONDecodeError as exc:
        raise SmokeTestError(f"{url}: malformed event {payload[:120]!r}") from exc
    if "error" in data:
        raise SmokeTestError(f"{url}: error event: {json.dumps(data['error'])[:300]}")
    choices = data.get("choices") or []
    if not choices:
        return ""  # the usage chunk
    return (choices[0].get("delta") or {}).get("content") or ""
