"""ASGI middleware: a request id on every request, and caps on request URL and body size.

A URL (path and query string) longer than ``MAX_URL_BYTES`` is answered 414 before any
parsing: no name or filter of the API comes near it.

A write whose enforcement by the workers could not be confirmed (``api.deps.enforce``) says
so in ``X-Sluice-Enforcement`` (``pending``, or ``fenced <workers>``).

Written as plain ASGI (not ``BaseHTTPMiddleware``) to keep the per-request cost small.
"""

from __future__ import annotations

import uuid

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.errors import reason_response

MAX_URL_BYTES = 16384
REQUEST_ID_HEADER = b"x-request-id"
ENFORCEMENT_HEADER = b"x-sluice-enforcement"


class HttpMiddleware:
    """Plain ASGI middleware that acts on HTTP requests (``http``) only: lifespan and WebSocket
    messages go straight through to ``app``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self.http(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        """One HTTP request."""
        raise NotImplementedError


class RequestContextMiddleware(HttpMiddleware):
    """Sets ``scope["state"]["request_id"]`` and echoes it as ``X-Request-Id``; caps bodies."""

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        super().__init__(app)
        self.max_body_bytes = max_body_bytes

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        request_id = ""
        length = -1
        for name, value in scope["headers"]:
            if name == REQUEST_ID_HEADER:
                request_id = value.decode("latin-1")[:64]
            elif name == b"content-length" and value.isdigit():
                length = int(value)
        request_id = request_id or uuid.uuid4().hex
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        if length > self.max_body_bytes:
            await _too_large(scope, receive, send, request_id, self.max_body_bytes)
            return
        if len(scope.get("raw_path") or b"") + len(scope["query_string"]) > MAX_URL_BYTES:
            response = reason_response(414, f"Request URL longer than {MAX_URL_BYTES} bytes")
            response.headers[REQUEST_ID_HEADER.decode()] = request_id
            await response(scope, receive, send)
            return

        received = 0
        limit = self.max_body_bytes

        async def capped_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
            return message

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.append((REQUEST_ID_HEADER, request_id.encode("latin-1")))
                enforcement = state.get("enforcement")
                if enforcement:
                    headers.append((ENFORCEMENT_HEADER, enforcement.encode("latin-1")))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, capped_receive, send_with_id)
        except BodyTooLarge:
            await _too_large(scope, receive, send, request_id, limit)


class BodyTooLarge(HTTPException):
    """Raised while the app reads a chunked body past the limit; answered 413."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"Request body larger than {limit} bytes")


async def _too_large(
    scope: Scope, receive: Receive, send: Send, request_id: str, limit: int
) -> None:
    response = reason_response(413, f"Request body larger than {limit} bytes")
    response.headers[REQUEST_ID_HEADER.decode()] = request_id
    await response(scope, receive, send)
