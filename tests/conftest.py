"""Shared fixtures: a private PostgreSQL server, a private Redis, and the admin API over HTTP.

A test run brings its own PostgreSQL, as it brings its own ``redis-server``: the first process
of the run (the xdist controller, or the only process) creates a throw-away cluster on a free
port (``server.embedded_postgres``) and removes it at the end; ``SLUICE_TEST_PG_URL`` names an
existing server instead (trust auth, or the password in the URL).  Every test session (and
every xdist worker) creates its own database there, migrated with Alembic, and starts its own
``redis-server`` on a free port.  Nothing is mocked.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis
import uvicorn
from sqlalchemy import Engine, text
from sqlalchemy.exc import OperationalError

from api.app import create_app
from migrations import upgrade
from models.db import create_scratch_database, make_sync_engine
from models.db import drop_database as drop_scratch_database
from models.settings import Settings
from server.embedded_postgres import EmbeddedPostgres, PostgresNotFound
from server.embedded_redis import EmbeddedRedis, free_port
from server.http_protocol import HTTP_PROTOCOL

PG_URL_VARIABLE = "SLUICE_TEST_PG_URL"
# The throw-away cluster this process started (None when the URL came from the environment).
_own_postgres: EmbeddedPostgres | None = None
# Tables emptied between tests; the cluster row and the schema version stay.
STATEFUL_TABLES = (
    "audit_log",
    "outbox_events",
    "rate_report",
    "backlog_report",
    "advice_report",
    "report_runs",
    "broker_config",
    "dispatch_rate_policies",
    "subscriptions",
    "topics",
    "namespaces",
    "tenants",
    "resource_group_attachments",
    "resource_groups",
)


# The slowest files of the suite (a whole run's ``--junitxml``, seconds summed per file, on
# 2026-11-26: 125 s down to 31 s), run first.  ``-n 2 --dist loadfile`` hands whole files to the
# two processes in collection order, so a slow file collected late kept one process busy for
# minutes after the other had finished, the progress stuck at 97-99%; started first, they
# overlap the many short files instead.
SLOW_FIRST = (
    "tests/test_standalone.py",
    "tests/workers/test_resource_groups.py",
    "tests/reports/test_transforms.py",
    "tests/workers/test_operations.py",
    "tests/workers/test_simulate_e2e.py",
    "tests/reports/test_spark_cluster.py",
    "tests/cluster/test_strict_bound_on_cluster.py",
    "tests/cluster/test_durable_acks_on_cluster.py",
    "tests/workers/test_publish_rate.py",
    "tests/faults/test_standalone_supervision.py",
    "tests/reports/test_jobs.py",
    "tests/console/test_console.py",
    "tests/workers/test_strict_bound.py",
    "tests/api/test_hostile_input.py",
    "tests/faults/test_api_fuzz.py",
    "tests/cluster/test_resource_groups_on_cluster.py",
    "tests/cluster/test_cluster_faults.py",
    "tests/workers/test_throttling.py",
    "tests/workers/test_priority.py",
    "tests/cluster/test_priority_cluster.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The files of ``SLOW_FIRST`` first, in its order; the rest as collected."""
    rank = {path: index for index, path in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.partition("::")[0], len(rank)))


def pytest_configure(config: pytest.Config) -> None:
    """Start the run's PostgreSQL unless ``SLUICE_TEST_PG_URL`` names one.

    xdist workers inherit the variable from the controller, so a run has one server.
    """
    global _own_postgres
    if os.environ.get(PG_URL_VARIABLE):
        return
    try:
        _own_postgres = EmbeddedPostgres().start()
    except PostgresNotFound as exc:
        raise pytest.UsageError(f"{exc}; or set {PG_URL_VARIABLE} to a server") from None
    os.environ[PG_URL_VARIABLE] = _own_postgres.url


def pytest_unconfigure(config: pytest.Config) -> None:
    """Stop and remove the run's PostgreSQL if this process started it."""
    global _own_postgres
    if _own_postgres is not None:
        _own_postgres.stop()
        _own_postgres = None
        os.environ.pop(PG_URL_VARIABLE, None)


def pg_server_url() -> str:
    """URL of the test server's ``postgres`` database."""
    return os.environ[PG_URL_VARIABLE]


def create_database(prefix: str = "sluice_test") -> str:
    """Create an empty database on the test server; return its URL."""
    return create_scratch_database(pg_server_url(), prefix)


def drop_database(url: str) -> None:
    """Drop a database created by ``create_database``."""
    drop_scratch_database(pg_server_url(), url)


def migrated_database(prefix: str = "sluice_test") -> Iterator[str]:
    """For a fixture to ``yield from``: a migrated database on the test server, dropped
    afterwards."""
    url = create_database(prefix)
    upgrade(url)
    yield url
    drop_database(url)


def sync_engine(url: str) -> Iterator[Engine]:
    """For a fixture to ``yield from``: a synchronous engine on ``url``, disposed afterwards."""
    engine = make_sync_engine(url)
    yield engine
    engine.dispose()


def suite_settings(database_url: str, redis_url: str, data_dir: Path) -> Settings:
    """Settings of a suite's admin service and workers on its database and Redis."""
    return Settings(
        database_url=database_url,
        redis_url=redis_url,
        data_dir=data_dir,
        events_stream="sluice:events",
        outbox_sweep_seconds=0.2,
    )


def served(settings: Settings) -> Iterator[ServerThread]:
    """For a fixture to ``yield from``: the admin service over HTTP, stopped afterwards."""
    server = ServerThread(create_app(settings)).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def database_url() -> Iterator[str]:
    """A migrated PostgreSQL database private to this test session."""
    yield from migrated_database()


@pytest.fixture(scope="session")
def db(database_url: str) -> Iterator[Engine]:
    """A synchronous engine on the session database, for direct assertions."""
    yield from sync_engine(database_url)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    """A redis-server private to this test session."""
    server = EmbeddedRedis(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def settings(database_url: str, redis_server: EmbeddedRedis, tmp_path_factory) -> Settings:
    """Settings pointing at the private database and Redis."""
    return suite_settings(database_url, redis_server.url, tmp_path_factory.mktemp("data"))


class ServerThread:
    """uvicorn serving an app in a background thread, on a free port."""

    def __init__(self, app, port: int | None = None) -> None:
        self.port = port or free_port()
        self.app = app
        self.server = uvicorn.Server(
            uvicorn.Config(
                app, host="127.0.0.1", port=self.port, log_level="warning", http=HTTP_PROTOCOL
            )
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        """Base URL of the server."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ServerThread:
        """Start and wait until the server accepts requests."""
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("admin server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        """Ask the server to exit and wait for it."""
        self.server.should_exit = True
        self.thread.join(15)


@pytest.fixture(scope="session")
def admin_server(settings: Settings) -> Iterator[ServerThread]:
    """The admin service over real HTTP on the private database and Redis."""
    yield from served(settings)


def truncate(engine: Engine) -> None:
    """Empty every stateful table (retrying when the admin server's background reads make
    the TRUNCATE a deadlock victim)."""
    for attempt in range(5):
        try:
            with engine.begin() as connection:
                connection.execute(
                    text(f"TRUNCATE {', '.join(STATEFUL_TABLES)} RESTART IDENTITY CASCADE")
                )
            return
        except OperationalError:
            if attempt == 4:
                raise
            time.sleep(0.1)


def flush_redis(url: str) -> None:
    """Empty a Redis server."""
    client = redis.Redis.from_url(url)
    try:
        client.flushall()
    finally:
        client.close()


@pytest.fixture
def http(
    admin_server: ServerThread, db: Engine, redis_server: EmbeddedRedis
) -> Iterator[httpx.Client]:
    """An HTTP client on a freshly emptied admin service (database and Redis)."""
    truncate(db)
    flush_redis(redis_server.url)
    with httpx.Client(base_url=admin_server.url, timeout=30) as client:
        yield client


@pytest.fixture
def tmp_data(tmp_path: Path) -> Path:
    """A fresh data folder."""
    return tmp_path / "data"


@pytest.fixture(scope="session")
def spark():
    """One ``local[1]`` SparkSession for the whole test session (reporting tests)."""
    pytest.importorskip("pyspark", reason="reporting needs the 'reports' extra")
    from reports.session import spark_session

    session = spark_session(
        Settings(spark_master="local[1]", spark_shuffle_partitions=1), "sluice-tests"
    )
    yield session
    session.stop()
