"""``sluice worker``: build the worker's connections, run it, stop it cleanly on SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket

import uvicorn
from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine

from models.db import make_async_engine, make_session_factory
from models.settings import Settings
from server.quiet_server import QuietServer
from sluice.protocol.connection import connect_async
from sluice.protocol.version import ProtocolMismatch
from sluice.waits import wait_event
from workers.http import create_http_app
from workers.worker import Worker

log = logging.getLogger(__name__)


def database_engine(settings: Settings, pool_size: int = 4) -> AsyncEngine:
    """The worker's PostgreSQL engine.  It reads a namespace's policies again on every
    batch of change events, and a check of the pooled connection before each of those reads
    would be a round trip more on the way to every confirmation: a connection in steady use
    skips it, one idle for a second is checked (``models.db``; after a database restart a
    failed read is retried with a full resync, as any failed batch)."""
    return make_async_engine(
        settings.effective_database_url, pool_size=pool_size, ping_after_idle=1.0
    )


def connect_redis(settings: Settings, connections: int | None = None) -> Redis:
    """A worker's Redis client: on one server at most ``connections`` connections (default
    ``worker_redis_connections``), and a call waits for a free one (thousands of
    dispatchers share them); on a Redis Cluster, a cluster client."""
    return connect_async(
        settings.effective_redis_url,
        max_connections=connections or settings.worker_redis_connections,
        blocking=True,
        health_check_interval=30,
    )


def build_worker(settings: Settings, sessions) -> Worker:
    """A worker with its dispatch connections and its control connections (leases,
    heartbeats, change events)."""
    return Worker(settings, connect_redis(settings), sessions, control=connect_redis(settings, 4))


async def until_stopped(stop: asyncio.Event, worker: Worker) -> None:
    """Return once ``stop`` is set; raise when one of the worker's loops ends first (they
    end only by failing, and a worker without them would hold partitions it no longer
    serves): ``sluice worker`` then exits with an error, ``sluice standalone`` runs the worker
    again."""
    stopped = asyncio.create_task(stop.wait())
    try:
        done, _ = await asyncio.wait([stopped, *worker.loops], return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
    if stopped in done:
        return
    ended = next(task for task in done if task is not stopped)
    error = None if ended.cancelled() else ended.exception()
    outcome = "was cancelled" if ended.cancelled() else f"ended: {error!r}"
    raise RuntimeError(f"worker {worker.id}: its {ended.get_name()} loop {outcome}") from error


async def run_worker(
    settings: Settings, stop: asyncio.Event | None = None, http_socket: socket.socket | None = None
) -> None:
    """Run one worker until ``stop`` is set or SIGTERM/SIGINT arrives; the HTTP endpoint
    listens on ``http_socket`` when given (bound by the caller), else it binds
    ``worker_http_port``."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    engine = database_engine(settings)
    worker = build_worker(settings, make_session_factory(engine))
    server = None
    server_task = None
    if settings.worker_http_port:
        server = QuietServer(
            uvicorn.Config(
                create_http_app(worker),
                host=settings.http_host,
                port=settings.worker_http_port,
                log_level="warning",
            )
        )
        server.install_signal_handlers = lambda: None
        sockets = [http_socket] if http_socket is not None else None
        server_task = asyncio.create_task(server.serve(sockets=sockets))
    try:
        while True:
            try:
                await worker.start()
                break
            except ProtocolMismatch:
                raise  # an older release than the deployment's: trying again cannot help
            except Exception as exc:  # database or Redis not there yet
                log.warning("worker start failed (%s); retrying in 2 s", exc)
                await worker.stop()
                if await wait_event(stop, 2):
                    return
                continue
        await until_stopped(stop, worker)
    finally:
        log.info("worker %s stopping", worker.id)
        await worker.stop()
        if server is not None:
            server.should_exit = True
            await server_task
        await worker.redis.aclose()
        await worker.control.aclose()
        await engine.dispose()
