"""``api.liveness``: the liveness probe is answered before routing, as the route answers it."""

from __future__ import annotations

import httpx
from starlette.types import Receive, Scope, Send

from api.liveness import LivenessProbe

HEALTH = "/admin/v2/brokers/health"


async def refuse(scope: Scope, receive: Receive, send: Send) -> None:
    """An inner app that answers 418, to tell what reached it."""
    await send({"type": "http.response.start", "status": 418, "headers": []})
    await send({"type": "http.response.body", "body": b"routed"})


def client(app) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")


async def test_a_plain_probe_never_reaches_the_router():
    async with client(LivenessProbe(refuse)) as http:
        probe = await http.get(HEALTH)
        assert (probe.status_code, probe.text) == (200, "ok")
        assert probe.headers["content-type"] == "text/plain; charset=utf-8"
        # Anything else goes on to the app: other paths, methods, a query string, a body.
        for answer in (
            await http.get("/admin/v2/brokers/ready"),
            await http.post(HEALTH),
            await http.head(HEALTH),
            await http.get(f"{HEALTH}?x=1"),
            await http.request("GET", HEALTH, content=b"{}"),
        ):
            assert answer.status_code == 418


async def test_the_app_answers_the_probe_as_its_route_does(http):
    """Through the whole app (``http``: the admin service on a real database and Redis), the
    probe and the same request through the router (a query string) answer alike."""
    fast = http.get(HEALTH, headers={"X-Request-Id": "probe-1"})
    routed = http.get(HEALTH, params={"via": "router"}, headers={"X-Request-Id": "probe-2"})
    for answer, request_id in ((fast, "probe-1"), (routed, "probe-2")):
        assert (answer.status_code, answer.text) == (200, "ok")
        assert answer.headers["content-type"] == "text/plain; charset=utf-8"
        assert answer.headers["x-request-id"] == request_id
    assert http.post(HEALTH).status_code == 405
