"""A process that starts while its Redis cannot be reached finds out later whether it is a
cluster, instead of taking it for a single server for good (``sluice.protocol.connection``).

The server is reached through a forwarder that refuses connections until the test opens it.
"""

from __future__ import annotations

import asyncio
import time

import pytest
import redis

from server import embedded_cluster
from server.embedded_cluster import EmbeddedCluster
from server.embedded_redis import EmbeddedRedis, free_port
from sluice.protocol.connection import Undecided, connect, connect_async, is_cluster
from tests.tcp_proxy import TcpProxy, eventually


def test_a_cluster_reachable_only_later_gets_a_cluster_client(redis_cluster: EmbeddedCluster):
    proxy = TcpProxy(redis_cluster.nodes[0].port)
    client = connect(f"redis://127.0.0.1:{proxy.port}/0", socket_connect_timeout=1)
    assert isinstance(client, Undecided)
    with pytest.raises(redis.ConnectionError):
        client.ping()
    assert not is_cluster(client)  # unknown yet: answers as a single server's client
    proxy.start()
    try:
        eventually(lambda: is_cluster(client))
        # Keys of every slot range work: the client follows the cluster's map.
        for i in range(30):
            client.set(f"late:{i}", i)
        assert [int(client.get(f"late:{i}")) for i in range(30)] == list(range(30))
        script = client.register_script("return redis.call('GET', KEYS[1])")
        assert int(script(keys=["late:7"])) == 7
    finally:
        proxy.cut()


def test_an_asyncio_client_decides_in_the_background(redis_cluster: EmbeddedCluster):
    proxy = TcpProxy(redis_cluster.nodes[1].port)

    async def scenario() -> None:
        client = connect_async(f"redis://127.0.0.1:{proxy.port}/0", socket_connect_timeout=1)
        assert isinstance(client, Undecided)
        with pytest.raises(redis.ConnectionError):
            await client.ping()
        proxy.start()
        deadline = time.monotonic() + 10
        while not is_cluster(client):
            assert time.monotonic() < deadline, "the asyncio client never decided"
            await asyncio.sleep(0.1)
        for i in range(20):
            await client.set(f"late-aio:{i}", i)
        assert int(await client.get("late-aio:13")) == 13
        await client.aclose()

    try:
        asyncio.run(scenario())
    finally:
        proxy.cut()


def test_a_cluster_node_on_a_port_a_single_server_had_gets_a_cluster_client(tmp_path, monkeypatch):
    """Servers started one after another on free ports may be given the same one: what a
    process learned of the first (a single server) must not make its client of the second
    (a cluster node) a single server's, which every key of another node's slots refuses."""
    plain = EmbeddedRedis(tmp_path / "plain").start()
    assert not is_cluster(connect(plain.url))
    plain.stop()
    ports = iter([plain.port])
    monkeypatch.setattr(embedded_cluster, "free_port", lambda: next(ports, 0) or free_port())
    cluster = EmbeddedCluster(tmp_path / "cluster").start()
    try:
        assert cluster.url == plain.url
        client = connect(cluster.url)
        assert is_cluster(client)
        for i in range(30):  # keys of every master's slots
            client.set(f"reused:{i}", i)
        assert [int(client.get(f"reused:{i}")) for i in range(30)] == list(range(30))
        client.close()
    finally:
        cluster.stop()
