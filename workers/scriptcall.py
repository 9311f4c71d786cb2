"""A lean EVALSHA for the dispatch hot path: keys packed once, calls pipelined together.

redis-py's ``Script`` call packs every argument, wraps the call in its retry and telemetry
machinery and takes a pooled connection per call; for a call made thousands of times a second
with the same twelve keys that costs more than the round trip.  ``PackedScript`` packs a key
set once (``prefix``) and per call only the arguments.  Calls made during one turn of the
event loop (many dispatchers wake at the same period boundary) go out together: one write on
one of the script's own connections, the replies read in order, each handed to its caller.
A script missing from the server's cache (after a restart) is loaded and the call repeated;
a connection failure fails the calls of that batch with the ``RedisError`` their callers
handle.  On a Redis Cluster the calls go through the cluster client instead (each to the node
of its keys' slot, following MOVED and ASK redirections), at most ``CLUSTER_CONCURRENCY`` at a
time.  Error replies (``FENCED``) come back to their own caller as ``ResponseError``.
``on_done`` callbacks run once Redis has answered a call (or it failed), whether or not its
caller still waits for it.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from redis.asyncio import Redis
from redis.exceptions import NoScriptError, ResponseError

from sluice.protocol.connection import is_cluster

MAX_BATCH = 256  # calls written together at most
CONNECTIONS = 4  # connections of one script at most (batches in flight at once)
CLUSTER_CONCURRENCY = 64  # calls of one script in flight at once on a Redis Cluster


def _bulk(value: bytes) -> bytes:
    return b"$%d\r\n%b\r\n" % (len(value), value)


def _encode(value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return str(value).encode()


class Packed(NamedTuple):
    """A key set packed once: its word count, its bytes, and the keys themselves."""

    words: int
    packed: bytes
    keys: list


@dataclass(slots=True)
class _Call:
    packed: bytes
    future: asyncio.Future
    on_done: Callable[[], None] | None
    words: list | None = None  # keys then arguments (the cluster path)


class PackedScript:
    """One Lua script, called with pre-packed keys, concurrent calls pipelined."""

    def __init__(self, redis: Redis, source: str) -> None:
        self.redis = redis
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()
        self._pending: list[_Call] = []
        self._flush_scheduled = False
        self._sending: set[asyncio.Task] = set()
        self._idle: list = []  # connections of this script not in use
        self._opened = 0
        self._free: asyncio.Condition | None = None
        self.cluster = is_cluster(redis)
        self._slots = asyncio.Semaphore(CLUSTER_CONCURRENCY) if self.cluster else None

    def prefix(self, keys: list[str]) -> Packed:
        """The packed ``EVALSHA sha numkeys keys...`` of a key set, and its word count."""
        words = [b"EVALSHA", self.sha.encode(), str(len(keys)).encode(), *map(_encode, keys)]
        return Packed(len(words), b"".join(_bulk(w) for w in words), list(keys))

    def call(
        self, prefix: Packed, args: list, on_done: Callable[[], None] | None = None
    ) -> asyncio.Future:
        """Queue a call of the script; the future gets its parsed reply (or error).  The call
        goes out at the end of this turn of the event loop, with the others queued in it."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        if self.cluster:
            task = asyncio.ensure_future(
                self._send_cluster(_Call(b"", future, on_done, [*prefix.keys, *args]), prefix)
            )
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)
            return future
        words, packed_keys, _keys = prefix
        packed = b"*%d\r\n%b%b" % (
            words + len(args),
            packed_keys,
            b"".join(_bulk(_encode(a)) for a in args),
        )
        self._pending.append(_Call(packed, future, on_done))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            loop.call_soon(self._flush)
        return future

    async def _send_cluster(self, call: _Call, prefix: Packed) -> None:
        """One call through the cluster client (which follows MOVED and ASK, and retries
        TRYAGAIN while a slot migrates); a script the node lacks (a replica promoted by a
        failover starts with an empty script cache) is loaded on every master first."""
        assert self._slots is not None and call.words is not None
        numkeys = len(prefix.keys)
        try:
            async with self._slots:
                try:
                    reply = await self.redis.evalsha(self.sha, numkeys, *call.words)
                except NoScriptError:
                    await self.redis.script_load(self.source)
                    reply = await self.redis.evalsha(self.sha, numkeys, *call.words)
        except BaseException as exc:
            _settle(call, exc)
            if not isinstance(exc, Exception):
                raise
            return
        _settle(call, reply)

    async def __call__(self, prefix: Packed, args: list) -> object:
        """Run the script with a packed key set and these arguments; the parsed reply."""
        return await self.call(prefix, args)

    def _flush(self) -> None:
        self._flush_scheduled = False
        pending, self._pending = self._pending, []
        for start in range(0, len(pending), MAX_BATCH):
            task = asyncio.ensure_future(self._send(pending[start : start + MAX_BATCH]))
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)

    async def _connection(self):
        if self._free is None:
            self._free = asyncio.Condition()
        async with self._free:
            while not self._idle and self._opened >= CONNECTIONS:
                await self._free.wait()
            if self._idle:
                return self._idle.pop()
            self._opened += 1
        return self.redis.connection_pool.make_connection()

    async def _give_back(self, connection) -> None:
        assert self._free is not None
        async with self._free:
            self._idle.append(connection)
            self._free.notify()

    async def _send(self, batch: list[_Call]) -> None:
        try:
            connection = await self._connection()
        except BaseException as exc:
            _fail(batch, exc)
            raise
        missing: list[_Call] = []
        try:
            await connection.send_packed_command(b"".join(c.packed for c in batch), False)
            # The first reply within the socket timeout; the others came with it (one timer
            # per batch, not per call).
            timeout = None
            for call in batch:
                try:
                    reply = await connection.read_response(timeout=timeout)
                    timeout = math.inf
                except NoScriptError:
                    missing.append(call)
                    continue
                except ResponseError as exc:  # a whole error reply: the connection is fine
                    _settle(call, exc)
                    continue
                _settle(call, reply)
        except BaseException as exc:
            await connection.disconnect()
            _fail(batch, exc)
            missing = []
        finally:
            await self._give_back(connection)
        if missing:
            try:
                await self.redis.script_load(self.source)
            except BaseException as exc:
                _fail(missing, exc)
                return
            await self._send(missing)

    async def close(self) -> None:
        """Close this script's connections."""
        for connection in self._idle:
            await connection.disconnect()
        self._idle = []


def _settle(call: _Call, outcome: object) -> None:
    if not call.future.done():
        if isinstance(outcome, BaseException):
            call.future.set_exception(outcome)
        else:
            call.future.set_result(outcome)
    if call.on_done is not None:
        done, call.on_done = call.on_done, None
        done()


def _fail(batch: list[_Call], exc: BaseException) -> None:
    for call in batch:
        _settle(call, exc)
