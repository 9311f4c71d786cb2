"""Durable acknowledgements: a send that returns only once replicas of the partition's Redis
master have it.

Redis replicates asynchronously: a send is acknowledged once the master stored it, and a
master lost before its replicas received the write loses it (docs/faults.md, "What an
acknowledgement promises").  A producer asked for durable acknowledgements (the namespace's
``durableAcks`` policy, or ``create_producer(durable_ack_replicas=N)``) sends each entry (a
message, or a whole batch) in one pipeline with ``WAIT N timeout`` on the same connection, so
``WAIT`` counts the replicas that confirmed that very write: one round trip, one ``WAIT`` per
entry.  On a master that runs with the append-only file (and a Redis that has it, 7.2 and
later) the pipeline asks ``WAITAOF 1 N timeout`` instead: the write is on the master's disk
and on N replicas' disks (so the replicas must run with the append-only file too).  Fewer
confirmations within the timeout fail the send with ``Timeout``; the entry was written to the
master and may be delivered, but the producer never reports it as stored.

On a Redis Cluster the pipeline goes to the master that owns the partition's slot; a
redirection, a cluster that is down or a node that cannot be reached refreshes the slot map
and is retried like a lost connection (``RedisConnectionError``), until the send timeout.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from redis.exceptions import (
    AskError,
    ClusterDownError,
    NoScriptError,
    RedisClusterException,
    RedisError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from sluice.errors import InvalidConfiguration, Timeout

if TYPE_CHECKING:
    from sluice.client import Client

DEFAULT_TIMEOUT_MS = 1000
PROBE_MS = 2000  # how long the question "WAITAOF here?" may wait for the master's fsync
# Replies that mean the slot map changed or is changing: refreshed, then retried.  The cluster
# client's own ``RedisClusterException`` (not a ``RedisError``) includes ``SlotNotCoveredError``
# and "All slots are not covered": a slot no master serves, between a master's loss and its
# replica's promotion.
TOPOLOGY_ERRORS = (AskError, TryAgainError, ClusterDownError, RedisClusterException)


@dataclass(frozen=True, slots=True)
class Durability:
    """How many replicas must confirm a send, and how long it waits for them (ms)."""

    replicas: int = 0
    timeout_ms: int = DEFAULT_TIMEOUT_MS

    def stricter(self, other: Durability) -> Durability:
        """The more replicas of the two; with equal counts, the shorter wait."""
        if other.replicas != self.replicas:
            return other if other.replicas > self.replicas else self
        return self if self.timeout_ms <= other.timeout_ms else other


NONE = Durability()


class DurableWriter:
    """Runs a produce script call and its ``WAIT`` on one connection of the right master;
    ``asked`` is what the producer asks for, beside the partitions' policies."""

    def __init__(self, client: Client, asked: Durability = NONE) -> None:
        if asked.replicas < 0 or asked.timeout_ms < 1:
            raise InvalidConfiguration(
                "durable_ack_replicas must be >= 0 and durable_ack_timeout_ms >= 1"
            )
        self.asked = asked
        self._client = client
        self._aof: dict[str, bool] = {}  # per node: WAITAOF 1 N (True) or WAIT N (False)
        self._lock = threading.Lock()

    def call(self, sha: str, script_keys: list[str], args: list, durability: Durability) -> Any:
        """The script's reply once ``durability.replicas`` replicas confirmed it; ``Timeout``
        when they did not in time; ``RedisConnectionError`` when the call should be retried."""
        try:
            name, connection = self._connection(script_keys[0])
            waits_aof = self._waits_aof(name, connection)
            reply, confirmed = self._execute(
                connection, sha, script_keys, args, durability, waits_aof
            )
        except NoScriptError:
            self._client.reload_scripts()  # a promoted replica starts without them
            raise RedisConnectionError("scripts loaded again") from None
        except (RedisConnectionError, RedisTimeoutError, *TOPOLOGY_ERRORS) as exc:
            self._refresh()
            raise RedisConnectionError(str(exc)) from None
        if confirmed < durability.replicas:
            raise Timeout(
                f"send not confirmed by {durability.replicas} replica(s) within "
                f"{durability.timeout_ms} ms ({confirmed} confirmed): it was written to the "
                "master, whose loss may lose it"
            )
        return reply

    @staticmethod
    def _execute(
        connection: Any,
        sha: str,
        script_keys: list[str],
        args: list,
        durability: Durability,
        waits_aof: bool,
    ) -> tuple[Any, int]:
        pipe = connection.pipeline(transaction=False)
        pipe.execute_command("EVALSHA", sha, len(script_keys), *script_keys, *args)
        if waits_aof:
            pipe.execute_command("WAITAOF", 1, durability.replicas, durability.timeout_ms)
        else:
            pipe.execute_command("WAIT", durability.replicas, durability.timeout_ms)
        reply, waited = pipe.execute(raise_on_error=False)
        for result in (reply, waited):
            if isinstance(result, Exception):
                raise result
        confirmed = int(waited[1]) if waits_aof else int(waited)
        return reply, confirmed

    def _connection(self, key: str) -> tuple[str, Any]:
        """The client of the master that owns ``key`` (the server itself on a single one)."""
        redis = self._client.redis
        if not self._client.cluster:
            return "", redis
        node = redis.get_node_from_key(key)  # type: ignore[attr-defined]
        return node.name, redis.get_redis_connection(node)  # type: ignore[attr-defined]

    def _waits_aof(self, name: str, connection: Any) -> bool:
        """Whether the node has WAITAOF and runs with the append-only file (asked once)."""
        with self._lock:
            known = self._aof.get(name)
        if known is None:
            try:
                # The connection's earlier writes on the master's disk (at once, or within a
                # second with appendfsync everysec).
                local, _replicas = connection.execute_command("WAITAOF", 1, 0, PROBE_MS)
                known = int(local) >= 1
            except ResponseError:  # before Redis 7.2, or no append-only file: WAIT
                known = False
            with self._lock:
                self._aof[name] = known
        return known

    def _refresh(self) -> None:
        """Read the cluster's slot map again (a failover, a reshard)."""
        if self._client.cluster:
            with self._lock:
                self._aof.clear()
            with contextlib.suppress(RedisError):
                self._client.redis.nodes_manager.initialize()  # type: ignore[attr-defined]
