"""A client made while its single Redis server cannot be reached works once the server can
(``sluice.protocol.connection``: the undecided client; the cluster case is in
``tests/cluster/test_late_cluster.py``)."""

from __future__ import annotations

import time

import pytest
import redis

from sluice.protocol.connection import connect, is_cluster
from tests.tcp_proxy import TcpProxy, eventually


def test_a_single_server_reachable_only_later(redis_server):
    proxy = TcpProxy(int(redis_server.url.rsplit(":", 1)[1].split("/")[0]))
    client = connect(f"redis://127.0.0.1:{proxy.port}/0", socket_connect_timeout=1)
    with pytest.raises(redis.ConnectionError):
        client.ping()
    proxy.start()
    try:
        eventually(lambda: client.ping())
        time.sleep(1.1)  # asked again: a single server, decided for good
        assert client.ping() and not is_cluster(client)
        assert client.decided() is client.decided()
    finally:
        proxy.cut()
