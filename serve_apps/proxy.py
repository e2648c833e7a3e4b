"""Forward an HTTP request from a Serve replica to the engine server it owns, streaming the answer.

Server-sent events are passed through chunk by chunk as they arrive (no buffering), so time to
first token seen by a client of the Serve app is the engine's plus one local hop.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import aiohttp
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

_FORWARDED_HEADERS = ("content-type", "accept", "authorization")


def sub_path(request: Request) -> str:
    """The request path below the app's route prefix (Serve puts the prefix in root_path)."""
    path = request.url.path
    root = str(request.scope.get("root_path") or "").rstrip("/")
    if root and (path == root or path.startswith(root + "/")):
        path = path[len(root):]
    return path or "/"


class Upstream:
    """One keep-alive connection pool per replica to its engine server (created on the replica's loop)."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            timeout = aiohttp.ClientTimeout(total=None, sock_connect=10)
            self._session = aiohttp.ClientSession(timeout=timeout)
        return self._session

    async def open(self, request: Request, body: bytes | None = None) -> aiohttp.ClientResponse:
        """Send `request` upstream (its body, or `body` when already read); raises aiohttp.ClientError."""
        url = self.base_url + sub_path(request)
        if request.url.query:
            url += "?" + request.url.query
        headers = {k: v for k, v in request.headers.items() if k.lower() in _FORWARDED_HEADERS}
        data = await request.body() if body is None else body
        return await self._client().request(request.method, url, data=data or None, headers=headers)

    async def forward(self, request: Request, body: bytes | None = None) -> Response:
        try:
            upstream = await self.open(request, body)
        except aiohttp.ClientError as exc:
            return error_response(502, f"engine server unreachable: {type(exc).__name__}: {exc}")
        return await relay(upstream)

    async def get_status(self, path: str, timeout_s: float) -> int:
        """Status of a GET (0 when nothing answered), for health checks."""
        try:
            async with self._client().get(self.base_url + path, timeout=aiohttp.ClientTimeout(total=timeout_s)) as r:
                return r.status
        except (aiohttp.ClientError, TimeoutError):
            return 0

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


async def relay(upstream: aiohttp.ClientResponse, headers: dict[str, str] | None = None) -> Response:
    """The upstream answer as a Starlette response: event streams pass through chunk by chunk."""
    media = upstream.headers.get("Content-Type", "")
    extra = dict(headers or {})
    if "text/event-stream" in media:
        return StreamingResponse(_stream(upstream), status_code=upstream.status, media_type=media,
                                 headers={"Cache-Control": "no-cache", **extra})
    try:
        data = await upstream.read()
    finally:
        upstream.release()
    return Response(data, status_code=upstream.status, media_type=media or None, headers=extra)


async def _stream(upstream: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    try:
        async for chunk in upstream.content.iter_any():
            yield chunk
    finally:
        upstream.release()


def error_response(status: int, message: str) -> Response:
    body = {"error": {"message": message, "type": "servetune_proxy_error", "code": status}}
    return Response(json.dumps(body), status_code=status, media_type="application/json")
