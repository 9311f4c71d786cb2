"""The liveness probe at a small, fixed cost: ``GET /admin/v2/brokers/health`` before routing.

Probes call it often (the Helm chart's liveness and startup probes, load balancers, the
benchmarks), and it must answer promptly on a machine whose cores a busy worker keeps busy.
Through the router, a request is matched against the app's routes one at a time, over a
hundred patterns before the brokers' routes: most of its cost, and a cost that grows with
the API.  ``LivenessProbe`` answers a plain probe (no query string, no body) before routing
with the route's own answer (``api.brokers.router.health``: 200 ``ok``, liveness only, no
database or Redis call).  It sits inside the request-id and CORS middlewares, so the answer
carries their headers as before; any other request, including a probe with a query string
or a body, goes through the router unchanged.
"""

from __future__ import annotations

from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from api.brokers.router import health

HEALTH_PATH = "/admin/v2/brokers/health"
BODY_HEADERS = (b"content-length", b"transfer-encoding")


class LivenessProbe:
    """Answers ``GET /admin/v2/brokers/health`` without routing; passes everything else on."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope["path"] == HEALTH_PATH
            and scope["method"] == "GET"
            and not scope["query_string"]
            and not any(name in BODY_HEADERS and value != b"0" for name, value in scope["headers"])
        ):
            await PlainTextResponse(await health())(scope, receive, send)
            return
        await self.app(scope, receive, send)
