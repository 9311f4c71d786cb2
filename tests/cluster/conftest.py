"""A private Redis Cluster for the tests of this folder: 3 masters on free loopback ports."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from server.embedded_cluster import EmbeddedCluster


@pytest.fixture(scope="module")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    """3 masters, no replicas, private to the module."""
    cluster = EmbeddedCluster(tmp_path_factory.mktemp("cluster"), masters=3).start()
    yield cluster
    cluster.stop()
