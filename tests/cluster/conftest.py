"""The same fixtures as a single server's, on a private Redis Cluster (3 masters).

Every fixture the worker and client suites use (``redis_server``, ``settings``,
``admin_server``, ``http``, ``worker``, ``client``, ...) is defined again here on a cluster
started from the ``redis-server`` binary, with a database of its own (the session's other
admin service must not relay this one's change events), so a suite re-run in this folder
(``test_*_on_cluster.py`` import a suite's tests) exercises the cluster topology unchanged.
``redis_cluster`` is a cluster private to one module, for the end-to-end and fault tests.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import Engine

from models.settings import Settings
from server.embedded_cluster import EmbeddedCluster
from tests.conftest import (
    ServerThread,
    migrated_database,
    served,
    suite_settings,
    sync_engine,
    truncate,
)
from tests.workers.conftest import (  # noqa: F401  (fixtures, re-defined for this folder)
    client,
    namespace,
    worker,
    worker_settings,
)


@pytest.fixture(scope="module")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    """3 masters, no replicas, private to the module."""
    cluster = EmbeddedCluster(tmp_path_factory.mktemp("cluster"), masters=3).start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    """The suites' cluster: 3 masters; ``url`` names one of them."""
    cluster = EmbeddedCluster(tmp_path_factory.mktemp("suite-cluster"), masters=3).start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def database_url() -> Iterator[str]:
    """A migrated database of the cluster suites' own."""
    yield from migrated_database("sluice_cluster")


@pytest.fixture(scope="session")
def db(database_url: str) -> Iterator[Engine]:
    yield from sync_engine(database_url)


@pytest.fixture(scope="session")
def settings(database_url: str, redis_server: EmbeddedCluster, tmp_path_factory) -> Settings:
    return suite_settings(database_url, redis_server.url, tmp_path_factory.mktemp("cluster-data"))


@pytest.fixture(scope="session")
def admin_server(settings: Settings) -> Iterator[ServerThread]:
    yield from served(settings)


@pytest.fixture
def http(
    admin_server: ServerThread, db: Engine, redis_server: EmbeddedCluster
) -> Iterator[httpx.Client]:
    """An HTTP client on a freshly emptied admin service (database and every master)."""
    truncate(db)
    redis_server.flushall()
    with httpx.Client(base_url=admin_server.url, timeout=30) as session:
        yield session
