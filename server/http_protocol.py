"""uvicorn's HTTP protocol, answering the requests it refuses itself with Pulsar's error body.

uvicorn refuses a request it cannot parse (malformed, or a request line and headers beyond the
parser's limit: about 80 KB with httptools) before the app sees it, with a plain-text 400.  The
protocols here send the same 400 as ``{"reason": ...}`` JSON, like every other refusal of the
admin API, so a client reads one error shape.  Pass ``HTTP_PROTOCOL`` as uvicorn's ``http``.
"""

from __future__ import annotations

import asyncio
import json

from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

REASON = "Malformed HTTP request, or its request line and headers are too large"
BODY = json.dumps({"reason": REASON}).encode()


class _JsonRefusal:
    transport: asyncio.Transport
    server_state: ServerState

    def send_400_response(self, msg: str) -> None:
        head = [b"HTTP/1.1 400 Bad Request\r\n"]
        for name, value in self.server_state.default_headers:
            head += [name, b": ", value, b"\r\n"]
        head += [
            b"content-type: application/json\r\n",
            b"content-length: " + str(len(BODY)).encode() + b"\r\n",
            b"connection: close\r\n\r\n",
        ]
        self.transport.write(b"".join(head) + BODY)
        self.transport.close()


class JsonH11Protocol(_JsonRefusal, H11Protocol):
    """h11 with JSON refusals."""


HTTP_PROTOCOL: type[asyncio.Protocol] = JsonH11Protocol
try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # httptools is optional; uvicorn's "auto" falls back to h11 the same way
    pass
else:

    class JsonHttpToolsProtocol(_JsonRefusal, HttpToolsProtocol):
        """httptools (uvicorn's choice when installed) with JSON refusals."""

    HTTP_PROTOCOL = JsonHttpToolsProtocol
