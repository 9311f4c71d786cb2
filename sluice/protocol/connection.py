"""The one way Sluice opens Redis connections: a single server or a Redis Cluster, from a URL.

Every part of Sluice (admin service, workers, client, Celery tasks, stats landing, the
embedded server's readiness check) builds its Redis client here.  The URL is all it takes: the
server it names is asked (``INFO cluster``) whether it runs in cluster mode, and the answer is
a ``RedisCluster`` client that starts from that node and discovers the others, or a plain
``Redis`` client, as before.  TLS (``rediss://`` with ``ssl_ca_certs=...``), passwords and ACL
users come from the URL either way.  The answer is remembered per URL for the process.

``connect`` returns a synchronous client, ``connect_async`` an asyncio one; ``is_cluster``
tells which kind a client is.  A server that cannot be reached when asked is taken for a
single server (the callers then fail and retry as they always did); ``connect_async`` with
``probe=False`` skips the question when the caller already knows the answer.
"""

from __future__ import annotations

import threading
from typing import Any

import redis
import redis.asyncio
from redis.exceptions import RedisError

_modes: dict[str, bool] = {}
_lock = threading.Lock()

# Connections per cluster node a client may open at most: redis-py's asyncio cluster client
# refuses a command beyond it instead of waiting, so it is generous.
CLUSTER_NODE_CONNECTIONS = 1024


def cluster_mode(url: str, timeout: float = 5.0) -> bool:
    """Whether the server of ``url`` runs with ``cluster-enabled yes`` (asked once per URL)."""
    with _lock:
        known = _modes.get(url)
    if known is not None:
        return known
    probe = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
    try:
        info = probe.info("cluster")
    except redis.ResponseError:  # INFO not allowed for this ACL user: ask CLUSTER INFO
        try:
            probe.execute_command("CLUSTER INFO")  # type: ignore[no-untyped-call]
            enabled = True
        except redis.ResponseError:
            enabled = False
    except RedisError:
        return False  # unreachable now: not remembered, asked again next time
    else:
        enabled = bool(int(info.get("cluster_enabled", 0)))
    finally:
        probe.close()
    with _lock:
        _modes[url] = enabled
    return enabled


def is_cluster(client: object) -> bool:
    """Whether ``client`` (sync or asyncio, or one of their pipelines) talks to a cluster."""
    return isinstance(
        client,
        (
            redis.RedisCluster,
            redis.asyncio.RedisCluster,
            redis.cluster.ClusterPipeline,
            redis.asyncio.cluster.ClusterPipeline,
        ),
    )


def _evalsha(self: Any, sha: str, numkeys: int, *keys_and_args: Any) -> Any:
    return self.execute_command("EVALSHA", sha, numkeys, *keys_and_args)


async def _evalsha_queued(self: Any, sha: str, numkeys: int, *keys_and_args: Any) -> Any:
    # Queued at once; awaiting an asyncio cluster pipeline itself would empty its queue.
    self.execute_command("EVALSHA", sha, numkeys, *keys_and_args)
    return self


def _publish(self: Any, channel: Any, message: Any, **kwargs: Any) -> Any:
    return self.execute_command("PUBLISH", channel, message, **kwargs)


class ClusterPipeline(redis.cluster.ClusterPipeline):
    """A cluster pipeline that takes script calls and PUBLISH, as a single server's does.

    redis-py refuses both in cluster pipelines; a script call goes to the node of its keys'
    slot like any other command (every Sluice script's keys share one slot), and PUBLISH
    reaches every node's subscribers from any node."""

    evalsha = _evalsha
    publish = _publish


class AsyncClusterPipeline(redis.asyncio.cluster.ClusterPipeline):
    """``ClusterPipeline`` for the asyncio client."""

    evalsha = _evalsha_queued
    publish = _publish


class RedisCluster(redis.RedisCluster):
    """A cluster client whose pipelines take script calls and PUBLISH."""

    def pipeline(self, *args: Any, **kwargs: Any) -> Any:
        pipe = super().pipeline(*args, **kwargs)  # type: ignore[no-untyped-call]
        pipe.__class__ = ClusterPipeline
        return pipe


class AsyncRedisCluster(redis.asyncio.RedisCluster):
    """An asyncio cluster client whose pipelines take script calls and PUBLISH."""

    def pipeline(self, *args: Any, **kwargs: Any) -> Any:
        pipe = super().pipeline(*args, **kwargs)
        pipe.__class__ = AsyncClusterPipeline  # type: ignore[type-abstract]
        return pipe


def _cluster_options(options: dict[str, Any]) -> dict[str, Any]:
    options = dict(options)
    options.setdefault("max_connections", CLUSTER_NODE_CONNECTIONS)
    return options


def connect(url: str, **options: Any) -> redis.Redis:
    """A synchronous client for ``url``; ``options`` are redis-py connection options."""
    if cluster_mode(url, options.get("socket_connect_timeout") or 5.0):
        options.pop("max_connections", None)
        return RedisCluster.from_url(url, **options)  # type: ignore[return-value]
    return redis.Redis.from_url(url, **options)


def connect_async(
    url: str,
    *,
    max_connections: int | None = None,
    blocking: bool = False,
    probe: bool = True,
    **options: Any,
) -> redis.asyncio.Redis:
    """An asyncio client for ``url``.  On a single server, ``max_connections`` bounds its pool
    and with ``blocking`` a call waits for a free connection; a cluster client opens up to
    ``CLUSTER_NODE_CONNECTIONS`` per node.  ``options`` are redis-py connection options."""
    if probe and cluster_mode(url, options.get("socket_connect_timeout") or 5.0):
        return AsyncRedisCluster.from_url(  # type: ignore[return-value]
            url, **_cluster_options(options)
        )
    if blocking:
        pool = redis.asyncio.BlockingConnectionPool.from_url(
            url, max_connections=max_connections or 50, timeout=None, **options
        )
        return redis.asyncio.Redis(connection_pool=pool)
    if max_connections is not None:
        options["max_connections"] = max_connections
    return redis.asyncio.Redis.from_url(url, **options)


def raw_client(client: redis.Redis) -> redis.Redis:
    """A client sharing ``client``'s connections that returns XRANGE replies unparsed
    (``[id, [field, value, ...]]``).  A cluster client is returned as it is (its nodes parse
    replies themselves): pass what it reads through ``raw_rows``."""
    if is_cluster(client):
        return client
    raw = redis.Redis(connection_pool=client.connection_pool)
    raw.response_callbacks.pop("XRANGE", None)
    return raw


def raw_rows(replies: list[Any]) -> list[Any]:
    """XRANGE replies (one list of entries each) in the unparsed form, whichever client read
    them: a parsed entry ``(id, {field: value})`` becomes ``[id, [field, value, ...]]``."""
    return [
        [
            [entry[0], [item for pair in entry[1].items() for item in pair]]
            if isinstance(entry[1], dict)
            else entry
            for entry in rows
        ]
        for rows in replies
    ]
