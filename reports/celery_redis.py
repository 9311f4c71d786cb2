"""Where Celery's broker and result backend live when ``REDIS_URL`` names a Redis Cluster.

Celery's Redis transport (kombu) and result backend speak to one server, not to a cluster.
On a cluster they are given every key under the hash tag ``{sluice-celery}`` (kombu's and
Celery's ``global_keyprefix``), so all of Celery's keys share one slot, and the URL of the
master serving that slot, with the scheme, credentials and options of ``REDIS_URL``.  On a
single server nothing changes.  The master is looked up when the Celery app is built: after
that shard fails over, or its slot moves, restart the Celery processes (they then find the
new master).
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from redis.crc import key_slot

from sluice.protocol.connection import cluster_mode, connect

TAG = "{sluice-celery}"
PREFIX = TAG + ":"


def celery_redis(url: str, probe: bool = True) -> tuple[str, dict]:
    """The URL Celery uses and the transport options its broker and backend need."""
    if not probe or not cluster_mode(url):
        return url, {}
    client = connect(url)
    try:
        node = client.nodes_manager.get_node_from_slot(key_slot(TAG.encode()))
        host, port = node.host, node.port
    finally:
        client.close()
    parts = urlsplit(url)
    credentials = parts.netloc.rpartition("@")[0]
    netloc = f"{credentials}@{host}:{port}" if credentials else f"{host}:{port}"
    return urlunsplit(parts._replace(netloc=netloc)), {"global_keyprefix": PREFIX}
