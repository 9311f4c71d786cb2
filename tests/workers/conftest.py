"""Fixtures for data-plane tests: a real worker on its own event loop, a real client.

The worker shares the session's private PostgreSQL database and Redis with the admin server,
so a test drives everything the way a user would: policies over HTTP, messages through the
client, the worker in between.
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import threading
import time
from collections.abc import Callable, Iterator

import httpx
import pytest
import redis

import sluice
from models.db import make_session_factory
from models.settings import Settings
from tests.bodies import dispatch_rate as rate  # noqa: F401  (the suites import it from here)
from workers.main import build_worker, database_engine
from workers.worker import Worker

ADMIN = "/admin/v2"


class WorkerThread:
    """A ``Worker`` running on an event loop in a background thread."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.worker: Worker | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> WorkerThread:
        """Start the worker and wait until it is ready."""
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("worker did not start")
        if self._error:
            raise self._error
        return self

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        engine = database_engine(self.settings, pool_size=2)
        worker = build_worker(self.settings, make_session_factory(engine))
        try:
            await worker.start()
            self.worker = worker
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            raise
        self._ready.set()
        await self._stop.wait()
        await worker.stop()
        await worker.redis.aclose()
        await worker.control.aclose()
        await engine.dispose()

    def call(self, fn: Callable[[Worker], object]):
        """Run ``fn(worker)`` on the worker's loop (coroutines are awaited); return the result."""

        async def run():
            result = fn(self.worker)
            if asyncio.iscoroutine(result):
                result = await result
            return result

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(30)

    def stop(self) -> None:
        """Stop the worker and wait for its thread; on a hang, show where it hangs."""
        if self.loop is not None and self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(20)
        if self._thread.is_alive():
            faulthandler.dump_traceback(all_threads=True)
            if self.loop is not None:
                self.loop.call_soon_threadsafe(_print_tasks)
                time.sleep(1)
            raise RuntimeError("worker did not stop within 20 s")


def _print_tasks() -> None:
    for task in asyncio.all_tasks():
        task.print_stack()


@pytest.fixture
def worker_settings(settings: Settings) -> Settings:
    """Settings for a test worker: quick housekeeping and snapshots."""
    return settings.model_copy(
        update={
            "worker_http_port": 0,
            "consumer_timeout_seconds": 3.0,
            "stats_interval_seconds": 1.0,
            "worker_resync_seconds": 30.0,
            "worker_id": "test-worker",
        }
    )


@pytest.fixture
def worker(http: httpx.Client, worker_settings: Settings) -> Iterator[WorkerThread]:
    """A running worker on a freshly emptied control and data plane."""
    thread = WorkerThread(worker_settings).start()
    yield thread
    thread.stop()


@pytest.fixture
def client(worker: WorkerThread, redis_server) -> Iterator[sluice.Client]:
    """A client connected to the session's Redis."""
    with sluice.Client(redis_server.url) as c:
        yield c


@pytest.fixture
def namespace(http: httpx.Client) -> str:
    """Tenant ``acme`` with namespace ``orders``; returns ``acme/orders``."""
    assert (
        http.put(f"{ADMIN}/tenants/acme", json={"allowedClusters": ["standalone"]}).status_code
        == 204
    )
    assert http.put(f"{ADMIN}/namespaces/acme/orders").status_code == 204
    return "acme/orders"


@contextlib.contextmanager
def monitored(url: str) -> Iterator[list[dict]]:
    """Every command the server at ``url`` runs inside the block, as MONITOR shows them (a
    client's, with its address and port; those a script runs, ``client_type`` "lua").  The
    list fills while the block runs and is complete when it ends."""
    seen: list[dict] = []
    stop = threading.Event()
    watcher = redis.Redis.from_url(url)
    started = threading.Event()

    def read() -> None:
        with watcher.monitor() as monitor:
            started.set()
            while not stop.is_set():
                seen.append(monitor.next_command())

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    started.wait(5)
    poke = redis.Redis.from_url(url)
    try:
        poke.ping()  # seen once MONITOR runs: nothing of the block is missed
        wait_until(lambda: seen, timeout=5)
        yield seen
    finally:
        stop.set()
        while thread.is_alive():  # any command ends the watcher's wait for the next one
            poke.ping()
            thread.join(0.1)
        poke.close()
        watcher.close()


def client_ports(client: sluice.Client) -> set[str]:
    """The local ports of the client's connections to Redis."""
    pool = client.redis.connection_pool
    connections = [*pool._available_connections, *pool._in_use_connections]
    return {str(c._sock.getsockname()[1]) for c in connections if c._sock is not None}


def wait_until(predicate: Callable[[], object], timeout: float = 10.0, every: float = 0.02):
    """Poll ``predicate`` until it is truthy; return its value or fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(every)


def drain(
    consumer: sluice.Consumer, expected: int, timeout: float, origin: float | None = None
) -> list[tuple[float, object]]:
    """Receive and ack until ``expected`` messages arrived or ``timeout``; (time, message),
    the time in seconds since ``origin`` (a ``time.monotonic()``; by default, the start)."""
    start = time.monotonic()
    since = start if origin is None else origin
    got = []
    while len(got) < expected and time.monotonic() - start < timeout:
        try:
            message = consumer.receive(timeout_millis=100)
        except sluice.Timeout:
            continue
        got.append((time.monotonic() - since, message))
        consumer.acknowledge(message)
    return got


@pytest.fixture
def fleet(http, namespace, settings, tmp_path):
    """Worker processes on the session's database and Redis, stopped after the test."""
    from tests.fleet import Fleet  # it imports this module's helpers

    fleet = Fleet(settings, tmp_path)
    yield fleet
    fleet.stop_all()
