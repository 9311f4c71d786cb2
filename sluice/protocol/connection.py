"""The one way Sluice opens Redis connections: a single server or a Redis Cluster, from a URL.

Every part of Sluice (admin service, workers, client, Celery tasks, stats landing, the
embedded server's readiness check) builds its Redis client here.  The URL is all it takes: the
server it names is asked (``INFO cluster``) whether it runs in cluster mode, and the answer is
a ``RedisCluster`` client that starts from that node and discovers the others, or a plain
``Redis`` client, as before.  TLS (``rediss://`` with ``ssl_ca_certs=...``), passwords and ACL
users come from the URL either way.  The answer is remembered per URL for the process.

``connect`` returns a synchronous client, ``connect_async`` an asyncio one; ``is_cluster``
tells which kind a client is.  A server that cannot be reached when asked gives an undecided
client: it answers as a single server's client would (its calls fail while the server is
down, and the callers retry as they always did) and keeps asking, at most once a second,
until the server answers; from then on it is the right client for good, so a process started
before its Redis Cluster (a pod before the cluster's, say) does not take it for a single
server.  ``connect_async`` with ``probe=False`` skips the question when the caller already
knows the answer.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any, cast
from urllib.parse import urlsplit

import redis
import redis.asyncio
from redis.commands.core import AsyncScript, Script
from redis.exceptions import RedisClusterException, RedisError

# What a Redis call may end with while a server or the cluster's shape changes: redis-py's
# cluster client raises some of it outside ``RedisError`` (``SlotNotCoveredError``: a slot no
# node serves, between a master's loss and its replica's promotion).  A loop that must outlive
# such a moment catches these, not ``RedisError`` alone.
REDIS_FAULTS: tuple[type[Exception], ...] = (RedisError, RedisClusterException)

_modes: dict[str, bool] = {}
_lock = threading.Lock()

# Connections per cluster node a client may open at most: redis-py's asyncio cluster client
# refuses a command beyond it instead of waiting, so it is generous.
CLUSTER_NODE_CONNECTIONS = 1024


REPROBE_SECONDS = 1.0  # an undecided client asks again at most this often


def cluster_mode(url: str, timeout: float = 5.0) -> bool:
    """Whether the server of ``url`` runs with ``cluster-enabled yes`` (asked once per URL;
    False, not remembered, while it cannot be reached)."""
    return bool(ask_cluster_mode(url, timeout))


def forget_cluster_mode(host: str, port: int) -> None:
    """Forget what was learned of the server at ``host:port``, under every URL naming it: a
    new server listens there now.  A process that starts servers on free ports (the embedded
    ones) may be given a port that a server of the other mode had before."""
    with _lock:
        for url in list(_modes):
            named = urlsplit(url)
            if (named.hostname, named.port or 6379) == (host, port):
                del _modes[url]


def ask_cluster_mode(url: str, timeout: float = 5.0) -> bool | None:
    """``cluster_mode``, or None when the server cannot be reached now."""
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
        return None  # unreachable now: not remembered, asked again next time
    else:
        enabled = bool(int(info.get("cluster_enabled", 0)))
    finally:
        probe.close()
    with _lock:
        _modes[url] = enabled
    return enabled


class Undecided:
    """A client for a server that could not be asked whether it runs a cluster.

    Every use goes to the client made for the answer once there is one; until then to a
    single server's client (whose calls fail while the server is down), and the question is
    asked again, at most once a second: synchronously for a synchronous client, in a task of
    the running loop for an asyncio one (no call waits for it).
    """

    def __init__(self, url: str, make: Callable[[bool], Any], timeout: float, *, aio: bool):
        self._url = url
        self._make = make
        self._timeout = timeout
        self._aio = aio
        self._decided: Any = None
        self._fallback: Any = None
        self._asked = 0.0
        self._probing = False
        self._task: asyncio.Task[None] | None = None

    def decided(self) -> Any:
        """The client in use now (the decided one, or the single server's meanwhile)."""
        if self._decided is not None:
            return self._decided
        if time.monotonic() - self._asked >= REPROBE_SECONDS and not self._probing:
            self._asked = time.monotonic()
            if self._aio:
                self._probe_in_loop()
            else:
                self._settle(ask_cluster_mode(self._url, self._timeout))
        if self._decided is not None:
            return self._decided
        if self._fallback is None:
            self._fallback = self._make(False)
        return self._fallback

    def _settle(self, mode: bool | None) -> None:
        if mode is None:
            return
        self._decided = self._fallback if mode is False and self._fallback else self._make(mode)

    def _probe_in_loop(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop yet: asked at the first use inside one
        self._probing = True

        async def probe() -> None:
            try:
                self._settle(await asyncio.to_thread(ask_cluster_mode, self._url, self._timeout))
            finally:
                self._probing = False

        self._task = loop.create_task(probe())  # kept: a task nobody holds may be dropped

    def register_script(self, script: str | bytes) -> Any:
        """A script bound to this client, so that its calls follow the decision."""
        if self._aio:
            return AsyncScript(self, script)  # type: ignore[arg-type]
        return Script(self, script)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.decided(), name)


def is_cluster(client: object) -> bool:
    """Whether ``client`` (sync or asyncio, or one of their pipelines) talks to a cluster."""
    if isinstance(client, Undecided):
        client = client.decided()
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
    timeout = options.get("socket_connect_timeout") or 5.0

    def make(cluster: bool) -> redis.Redis:
        if cluster:
            return RedisCluster.from_url(  # type: ignore[return-value]
                url, **{k: v for k, v in options.items() if k != "max_connections"}
            )
        return redis.Redis.from_url(url, **options)

    mode = ask_cluster_mode(url, timeout)
    if mode is None:
        return Undecided(url, make, timeout, aio=False)  # type: ignore[return-value]
    return make(mode)


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
    timeout = options.get("socket_connect_timeout") or 5.0

    def make(cluster: bool) -> redis.asyncio.Redis:
        if cluster:
            return AsyncRedisCluster.from_url(  # type: ignore[return-value]
                url, **_cluster_options(dict(options))
            )
        if blocking:
            pool = redis.asyncio.BlockingConnectionPool.from_url(
                url, max_connections=max_connections or 50, timeout=None, **options
            )
            return redis.asyncio.Redis(connection_pool=pool)
        extra: dict[str, Any] = (
            {} if max_connections is None else {"max_connections": max_connections}
        )
        return redis.asyncio.Redis.from_url(url, **options, **extra)

    if not probe:
        return make(False)
    mode = ask_cluster_mode(url, timeout)
    if mode is None:
        return Undecided(url, make, timeout, aio=True)  # type: ignore[return-value]
    return make(mode)


def use_credentials(client: redis.Redis, username: str, password: str) -> None:
    """Connect as ``username`` from now on: every connection of ``client`` (each node's, on a
    cluster) is closed and opened again with the new credentials when next used."""
    pools = [client.connection_pool] if not is_cluster(client) else []
    if is_cluster(client):
        cluster = cast(Any, client)
        cluster.nodes_manager.connection_kwargs.update(username=username, password=password)
        pools = [
            node.redis_connection.connection_pool
            for node in cluster.get_nodes()
            if node.redis_connection is not None
        ]
    for pool in pools:
        pool.connection_kwargs.update(username=username, password=password)
        pool.disconnect()
        pool.reset()  # a connection keeps the credentials it was made with: make new ones


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
