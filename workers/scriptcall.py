"""A lean EVALSHA for the dispatch hot path: keys packed once, calls pipelined together.

redis-py's ``Script`` call packs every argument, wraps the call in its retry and telemetry
machinery and takes a pooled connection per call; for a call made thousands of times a second
with the same twelve keys that costs more than the round trip.  ``PackedScript`` packs a key
set once (``prefix``) and per call only the arguments.  Calls made during one turn of the
event loop (many dispatchers wake at the same period boundary) go out together: one write on
one of the script's own connections, the replies read in order, each handed to its caller.
A script missing from the server's cache (after a restart) is loaded and the call repeated;
a connection failure fails the calls of that batch with the ``RedisError`` their callers
handle.  Calls made with ``call_packed`` and a group (the dispatch calls of one partition:
their keys share a slot) that meet in one turn run in one call of a multi script
(``dispatch_many.lua``: each call as the script alone would run it, in order), up to
``MAX_MERGED`` a call: a busy worker whose dispatchers of a partition wake together pays
one script run and one reply for them; ``call_many`` sends such a run made up by its caller.
On a Redis Cluster the calls go through the cluster
client instead (each to the node of its keys' slot, following MOVED and ASK redirections), at
most ``CLUSTER_CONCURRENCY`` at a time.  Error replies (``FENCED``) come back to their own
caller as ``ResponseError``.
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
MAX_MERGED = 32  # calls one multi call runs at most (one script run holds Redis for all)
CONNECTIONS = 4  # connections of one script at most (batches in flight at once)
CLUSTER_CONCURRENCY = 64  # calls of one script in flight at once on a Redis Cluster


def _bulk(value: bytes) -> bytes:
    return b"$%d\r\n%b\r\n" % (len(value), value)


def pack_args(args: list) -> bytes:
    """Arguments as they follow the keys in a packed call (one bulk string each)."""
    return b"".join(_bulk(_encode(a)) for a in args)


def _bulk_int(value: int) -> bytes:
    digits = str(value)
    return f"${len(digits)}\r\n{digits}\r\n".encode()


_SMALL_INTS = tuple(_bulk_int(i) for i in range(-1, 4096))  # budgets, offsets, limits


def bulk_int(value: int) -> bytes:
    """One integer argument, packed."""
    if -1 <= value < 4095:
        return _SMALL_INTS[value + 1]
    return _bulk_int(value)


def _encode(value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return str(value).encode()


class Packed(NamedTuple):
    """A key set packed once: its word count, its bytes (the call's head, then the keys),
    the keys themselves, and the keys' bytes alone."""

    words: int
    packed: bytes
    keys: list
    key_bytes: bytes = b""


@dataclass(slots=True)
class _Call:
    packed: bytes
    future: asyncio.Future | None
    on_done: Callable[[], None] | None
    words: list | None = None  # keys then arguments (the cluster path)
    # A call that may run together with others of its group (``call_packed``): its key set,
    # argument count and packed arguments; packed at the flush.
    group: object = None
    prefix: Packed | None = None
    count: int = 0
    args: bytes = b""
    members: list[_Call] | None = None  # the calls a multi call runs, in order


class PackedScript:
    """One Lua script, called with pre-packed keys, concurrent calls pipelined."""

    def __init__(self, redis: Redis, source: str, multi_source: str | None = None) -> None:
        self.redis = redis
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()
        # The script that runs several calls of a group in one run (``call_packed``), if any.
        self.multi_source = multi_source
        self.multi_sha = hashlib.sha1(multi_source.encode()).hexdigest() if multi_source else ""
        self.multi_calls = 0  # multi calls sent
        self.merged_calls = 0  # calls they ran
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
        key_bytes = b"".join(_bulk(_encode(k)) for k in keys)
        return Packed(
            len(words), b"".join(_bulk(w) for w in words[:3]) + key_bytes, list(keys), key_bytes
        )

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
        packed = b"*%d\r\n%b%b" % (
            prefix.words + len(args),
            prefix.packed,
            b"".join(_bulk(_encode(a)) for a in args),
        )
        self._pending.append(_Call(packed, future, on_done))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            loop.call_soon(self._flush)
        return future

    def call_packed(
        self,
        prefix: Packed,
        count: int,
        packed_args: bytes,
        on_done: Callable[[], None] | None,
        group: object = None,
    ) -> asyncio.Future:
        """``call`` with the arguments already packed (``count`` of them, ``pack_args``): a
        caller whose arguments barely change between calls keeps most of them packed.  Calls
        of one ``group`` (the subscriptions of one partition: their keys share a slot) queued
        in the same turn run in one call of the multi script, in the order they were queued,
        each answered with its own reply.  Not on a Redis Cluster (the cluster client takes
        the words): use ``call`` there."""
        assert not self.cluster, "packed arguments go to a single server only"
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        if group is None or not self.multi_sha:
            packed = b"*%d\r\n%b%b" % (prefix.words + count, prefix.packed, packed_args)
            self._pending.append(_Call(packed, future, on_done))
        else:
            self._pending.append(
                _Call(b"", future, on_done, None, group, prefix, count, packed_args)
            )
        if not self._flush_scheduled:
            self._flush_scheduled = True
            loop.call_soon(self._flush)
        return future

    def call_many(
        self, calls: list[tuple[Packed, int, bytes]], on_done: Callable[[], None] | None
    ) -> asyncio.Future:
        """Several calls of the script whose keys share a slot (each as ``call_packed`` takes
        it: key set, argument count, packed arguments), at most ``MAX_MERGED``, in one run of
        the multi script that goes out at the end of this turn; the future gets the list of
        their replies, an error reply (``FENCED``) as a ``ResponseError`` in its place."""
        assert self.multi_sha and not self.cluster and 0 < len(calls) <= MAX_MERGED
        future = asyncio.get_running_loop().create_future()
        members = [_Call(b"", None, None, None, None, *call) for call in calls]
        self._pending.append(_Call(self._multi_packed(members), future, on_done))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)
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
        if self.multi_sha:
            pending = self._merged(pending)
        for start in range(0, len(pending), MAX_BATCH):
            task = asyncio.ensure_future(self._send(pending[start : start + MAX_BATCH]))
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)

    def _merged(self, pending: list[_Call]) -> list[_Call]:
        """The calls to send: those of one group merged into one multi call (where the first
        of them was queued), a group of one packed as a call of its own."""
        groups: dict[object, list[_Call]] = {}
        order: list[_Call] = []
        for call in pending:
            if call.group is None:
                order.append(call)
                continue
            members = groups.get(call.group)
            if members is None:
                groups[call.group] = [call]
                order.append(call)
            else:
                members.append(call)
        sent = []
        for call in order:
            members = groups.get(call.group) if call.group is not None else None
            if members is None:
                sent.append(call)
            else:
                for start in range(0, len(members), MAX_MERGED):
                    sent.append(self._multi(members[start : start + MAX_MERGED]))
        return sent

    def _multi(self, members: list[_Call]) -> _Call:
        """One call of the multi script running ``members``: ARGV the call count, each
        call's key count, each call's argument count, then the calls' arguments; KEYS the
        calls' keys.  A single member is packed as a call of the script itself."""
        if len(members) == 1:
            call = members[0]
            prefix = call.prefix
            assert prefix is not None
            call.packed = b"*%d\r\n%b%b" % (prefix.words + call.count, prefix.packed, call.args)
            return call
        return _Call(self._multi_packed(members), None, None, members=members)

    def _multi_packed(self, members: list[_Call]) -> bytes:
        """The packed call of the multi script running ``members`` (see ``_multi``)."""
        key_counts = [len(m.prefix.keys) for m in members if m.prefix is not None]
        meta = [len(members), *key_counts, *(m.count for m in members)]
        words = 3 + sum(key_counts) + len(meta) + sum(m.count for m in members)
        packed = b"".join(
            (
                b"*%d\r\n" % words,
                _bulk(b"EVALSHA"),
                _bulk(self.multi_sha.encode()),
                bulk_int(sum(key_counts)),
                *(m.prefix.key_bytes for m in members if m.prefix is not None),
                *(bulk_int(n) for n in meta),
                *(m.args for m in members),
            )
        )
        self.multi_calls += 1
        self.merged_calls += len(members)
        return packed

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
                if self.multi_source:
                    await self.redis.script_load(self.multi_source)
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
    members = call.members
    if members is not None:  # a multi call: each call gets its own reply (or the error)
        if not isinstance(outcome, BaseException) and (
            not isinstance(outcome, list) or len(outcome) != len(members)
        ):
            outcome = ResponseError(f"multi call: {len(members)} replies expected")
        for i, member in enumerate(members):
            _settle(member, outcome if isinstance(outcome, BaseException) else outcome[i])
        return
    assert call.future is not None
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
