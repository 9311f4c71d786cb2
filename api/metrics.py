"""The admin service's Prometheus metrics, served at ``GET /metrics`` (open, as a Pulsar
broker's ``/metrics`` is by default).

* ``sluice_admin_http_requests_total{method,route,code}`` and
  ``sluice_admin_http_request_duration_seconds{method,route}``: every routed request, by its
  route template (``/admin/v2/namespaces/{tenant}/{namespace}/dispatchRate``), so the label
  set stays bounded.  The liveness probe is answered before routing and is not counted.
* ``sluice_admin_writes_total{outcome}`` and ``sluice_admin_enforcement_wait_seconds{outcome}``:
  writes that changed what the workers enforce, and how long the answer waited for every
  live worker to confirm (``confirmed``, ``fenced``: a worker did not confirm in time and was
  fenced off, ``pending``: it could not be confirmed, Redis being unavailable).
* ``sluice_admin_database_up`` and ``sluice_admin_redis_up``: 1 when a ``SELECT 1`` or a
  ``PING`` made for the scrape answered within a second.

The workers' own metrics (throttled dispatches by reason, backlog, consumers) are on each
worker's ``/metrics`` (``workers.metrics``); docs/observability.md lists every name.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from sqlalchemy import text
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.middleware import HttpMiddleware

PROBE_SECONDS = 1.0
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
WAIT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


@dataclass
class AdminMetrics:
    """One admin service's metrics, in a registry of its own."""

    registry: CollectorRegistry
    requests: Counter
    latency: Histogram
    writes: Counter
    enforcement_wait: Histogram
    database_up: Gauge
    redis_up: Gauge

    @classmethod
    def create(cls) -> AdminMetrics:
        """Fresh metrics (each app has its own: tests build many apps in one process)."""
        registry = CollectorRegistry(auto_describe=True)
        return cls(
            registry=registry,
            requests=Counter(
                "sluice_admin_http_requests",
                "Admin API requests by route template and status code",
                ["method", "route", "code"],
                registry=registry,
            ),
            latency=Histogram(
                "sluice_admin_http_request_duration_seconds",
                "Admin API request latency by route template",
                ["method", "route"],
                buckets=LATENCY_BUCKETS,
                registry=registry,
            ),
            writes=Counter(
                "sluice_admin_writes",
                "Writes that changed what the workers enforce, by how enforcement ended",
                ["outcome"],
                registry=registry,
            ),
            enforcement_wait=Histogram(
                "sluice_admin_enforcement_wait_seconds",
                "Time a write's answer waited for the workers to enforce it",
                ["outcome"],
                buckets=WAIT_BUCKETS,
                registry=registry,
            ),
            database_up=Gauge(
                "sluice_admin_database_up", "1 when the database answered", registry=registry
            ),
            redis_up=Gauge("sluice_admin_redis_up", "1 when Redis answered", registry=registry),
        )

    def enforced(self, outcome: str, seconds: float) -> None:
        """Count one enforced write and how long its answer waited."""
        self.writes.labels(outcome).inc()
        self.enforcement_wait.labels(outcome).observe(seconds)


class MetricsMiddleware(HttpMiddleware):
    """Times every routed HTTP request (plain ASGI: a few microseconds a request)."""

    def __init__(self, app: ASGIApp, metrics: AdminMetrics) -> None:
        super().__init__(app)
        self.metrics = metrics

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            route = scope.get("route")
            template = getattr(route, "path_format", None) or "unmatched"
            method = scope["method"]
            self.metrics.requests.labels(method, template, str(status)).inc()
            self.metrics.latency.labels(method, template).observe(time.perf_counter() - started)


async def _up(check) -> float:
    with contextlib.suppress(Exception):
        await asyncio.wait_for(check(), PROBE_SECONDS)
        return 1.0
    return 0.0


async def metrics_endpoint(request: Request) -> Response:
    """``GET /metrics``: the Prometheus text format."""
    state = request.app.state.sluice
    metrics: AdminMetrics = state.metrics

    async def select_one() -> None:
        async with state.engine.connect() as connection:
            await connection.execute(text("SELECT 1"))

    async def ping() -> None:
        await state.redis.ping()

    metrics.database_up.set(await _up(select_one))
    metrics.redis_up.set(await _up(ping))
    return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)
