"""The admin service's app factory.

``create_app(settings)`` wires routers, error handlers and middleware; the lifespan builds the
database engine, the Redis client and the outbox relay, makes sure the local cluster exists,
and tears everything down on shutdown.  Run it with
``uvicorn --factory api.app:create_app`` or ``sluice api``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Depends, FastAPI
from fastapi.middleware.cors import CORSMiddleware
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from api.audit.router import router as audit_router
from api.auth import AccessControl, AuthenticationMiddleware, authorize
from api.brokers.router import router as brokers_router
from api.clusters.router import router as clusters_router
from api.clusters.service import ensure_local_cluster
from api.console.router import router as console_router
from api.dataplane import DataPlane
from api.docs import install_docs
from api.enforcement import Enforcement
from api.errors import install_error_handlers
from api.identity.router import router as identity_router
from api.limits.router import ROUTERS as LIMITS_ROUTERS
from api.liveness import LivenessProbe
from api.metrics import AdminMetrics, MetricsMiddleware, metrics_endpoint
from api.middleware import RequestContextMiddleware
from api.namespaces.router import router as namespaces_router
from api.operations.router import router as operations_router
from api.outbox import OutboxRelay
from api.permissions.router import router as permissions_router
from api.policy_cache import PolicyCache
from api.reports.advice_router import router as advice_router
from api.reports.queue import ReportQueue
from api.reports.router import router as reports_router
from api.resource_groups.router import router as resource_groups_router
from api.responses import JsonResponse
from api.routing import SluiceRoute, index_routes, not_found
from api.sessions.router import router as sessions_router
from api.sessions.service import role_grants
from api.state import AppState
from api.tenants.router import router as tenants_router
from api.topics.router import router as topics_router
from api.websocket.router import close_websocket_client
from api.websocket.router import router as websocket_router
from dataplane import protocol
from dataplane.legacy_keys import migrate_legacy_keys
from dataplane.sessions import Sessions
from models.db import make_async_engine, make_session_factory
from models.settings import Settings
from sluice.protocol.connection import REDIS_FAULTS, connect_async

log = logging.getLogger(__name__)


def connect_redis(settings: Settings) -> Redis:
    """The admin service's Redis client, bounded so that no request hangs on Redis.

    A connection attempt gives up after ``redis_connect_timeout_seconds`` (1 s), a reply is
    awaited at most ``redis_timeout_seconds`` (3 s).  A refused or lost connection is retried
    once after 50-200 ms (the first call after a Redis restart finds its pooled connection
    dead and reconnects); a timeout is not retried.  So a call fails within about 0.2 s when
    Redis refuses connections and within about 3 s when it accepts them but does not answer,
    and the request answers 503 (``api.errors``).  redis-py's own default would retry ten
    times, each waiting up to 5 s.
    """
    return connect_async(
        settings.effective_redis_url,
        socket_connect_timeout=settings.redis_connect_timeout_seconds,
        socket_timeout=settings.redis_timeout_seconds,
        retry=Retry(
            ExponentialBackoff(cap=0.2, base=0.05), 1, supported_errors=(RedisConnectionError,)
        ),
    )


# Every HTTP router of the admin service, in the order they are matched.
ROUTERS = (
    clusters_router,
    tenants_router,
    identity_router,
    namespaces_router,
    *LIMITS_ROUTERS.values(),
    permissions_router,
    resource_groups_router,
    topics_router,
    operations_router,
    brokers_router,
    audit_router,
    reports_router,
    advice_router,
    console_router,
    sessions_router,
)


def create_app(settings: Settings | None = None, *, dataplane_acl: Any = None) -> FastAPI:
    """Build the admin service for ``settings`` (read from the environment by default).
    ``dataplane_acl`` replaces the data plane's credential manager (tests)."""
    settings = settings or Settings()
    access_control = AccessControl.from_settings(settings)  # fails fast on bad security config
    metrics = AdminMetrics.create()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        tasks = await _start(app, settings, access_control, dataplane_acl, metrics)
        # Objects made at start-up live as long as the process: keeping them out of the
        # collector's generations shortens the full collections that show up as latency spikes.
        gc.freeze()
        try:
            yield
        finally:
            gc.unfreeze()
            await _stop(app, tasks)

    app = FastAPI(
        title="Sluice admin API",
        version="0.1.0",
        description="Pulsar-compatible admin v2 API for dispatch throttling on Redis Streams.",
        lifespan=lifespan,
        default_response_class=JsonResponse,
        docs_url=None,  # served offline by api.docs
        redoc_url=None,
        # Authentication + the policy table in api.auth; with authentication off every call is
        # allowed, so the dependency (a measurable cost per request) is left out.
        dependencies=[Depends(authorize)] if access_control.authentication else [],
        # Pulsar's paths have no trailing slash; one is a 404 with a reason, not a redirect.
        redirect_slashes=False,
    )
    app.router.route_class = SluiceRoute  # the checks of api.routing, on the docs pages too
    app.router.default = not_found
    for router in ROUTERS:
        app.include_router(router)
    # Pulsar's WebSocket API: outside the app-wide dependency (made for HTTP requests); each
    # handler applies the same policy itself (api.auth.authorize_websocket).
    app.router.routes.extend(websocket_router.routes)
    # Prometheus, as a broker's /metrics: open, outside the OpenAPI document (api.metrics).
    app.add_api_route("/metrics", metrics_endpoint, methods=["GET"], include_in_schema=False)
    install_docs(app)
    index_routes(app, ROUTERS)
    install_error_handlers(app)
    _add_middleware(app, settings, access_control, metrics)
    return app


def _add_middleware(
    app: FastAPI, settings: Settings, access_control: AccessControl, metrics: AdminMetrics
) -> None:
    """The middlewares, innermost first."""
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    if access_control.authentication:
        # Innermost of the middlewares: CORS preflights and body limits come first.
        app.add_middleware(AuthenticationMiddleware, control=access_control)
    # The liveness probe answered before routing (it is open: no token needed either).
    app.add_middleware(LivenessProbe)
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=[o.strip() for o in settings.cors_origins.split(",") if o.strip()],
            allow_methods=["*"],
            allow_headers=["*"],
        )
    app.add_middleware(RequestContextMiddleware, max_body_bytes=settings.max_body_bytes)


async def _start(
    app: FastAPI,
    settings: Settings,
    access_control: AccessControl,
    dataplane_acl: Any,
    metrics: AdminMetrics,
) -> list[asyncio.Task]:
    """Connect, build the process state (``app.state.sluice``) and start the background
    tasks (returned)."""
    # Connections in steady use skip the check before each use (a round trip per
    # request); one idle for a second is checked (models.db).
    engine = make_async_engine(
        settings.effective_database_url, pool_size=settings.db_pool_size, ping_after_idle=1.0
    )
    sessions = make_session_factory(engine)
    redis = connect_redis(settings)
    relay = OutboxRelay(
        sessions,
        redis,
        settings.events_stream,
        maxlen=settings.events_stream_maxlen,
        sweep_seconds=settings.outbox_sweep_seconds,
    )
    await ensure_local_cluster(
        sessions, settings.cluster_name, f"http://localhost:{settings.http_port}"
    )
    try:
        await protocol.announce(redis, "this admin service")  # ProtocolMismatch: no start
        await migrate_legacy_keys(redis)
    except REDIS_FAULTS as exc:  # Redis may come later; the workers migrate on their start
        log.warning("protocol not announced, legacy keys not migrated at start: %s", exc)
    data_plane = DataPlane(redis, int(settings.consumer_timeout_seconds * 1000))
    cache = PolicyCache(sessions, redis, settings.events_stream)
    try:
        await cache.reload()
    except Exception as exc:  # the database may come later; reads fall back meanwhile
        log.warning("policy cache not loaded at start: %s", exc)
    enforcement = Enforcement(redis, settings.apply_timeout_seconds)
    reports = ReportQueue(settings)
    tasks = [
        asyncio.create_task(relay.run(), name="outbox-relay"),
        asyncio.create_task(relay.mark(), name="outbox-mark"),
        asyncio.create_task(cache.run(), name="policy-cache"),
        asyncio.create_task(enforcement.run(), name="enforcement"),
    ]
    # With authentication on, clients get Redis users of their own (api.sessions).
    if dataplane_acl is None and access_control.authentication:
        dataplane_acl = Sessions(
            redis,
            functools.partial(role_grants, sessions, access_control),
            settings.dataplane_session_seconds,
        )
        tasks.append(asyncio.create_task(dataplane_acl.run(), name="acl-sessions"))
    app.state.sluice = AppState(
        settings,
        engine,
        sessions,
        redis,
        relay,
        data_plane,
        cache,
        enforcement,
        reports,
        access_control,
        dataplane_acl,
        metrics=metrics,
    )
    state = app.state.sluice
    # A revoked grant closes the WebSocket connections it admitted (api.websocket.grants).
    cache.on_permissions.append(
        lambda: state.websocket.granted.recheck(state.dataplane_acl, state.sessions)
    )
    return tasks


async def _stop(app: FastAPI, tasks: list[asyncio.Task]) -> None:
    """Stop the background tasks and close what ``_start`` opened."""
    state: AppState = app.state.sluice
    for task in tasks:
        task.cancel()
    await asyncio.wait(tasks, timeout=5)
    await close_websocket_client(app)
    state.reports.close()
    await state.redis.aclose()
    await state.engine.dispose()
