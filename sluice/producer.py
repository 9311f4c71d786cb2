"""The producer: routes messages to partitions and appends them, one entry or one batch each.

Mirrors ``pulsar.Producer``: ``send`` (blocking, returns the ``MessageId``), ``send_async``
(callback ``(result, message_id)``), ``flush``, ``close``.  With batching enabled several
messages of one partition share one stream entry; the batch goes out when it is full or
``batching_max_publish_delay_ms`` after its first message; a blocking ``send`` sends the
batch it joined at once instead of waiting out the delay.  With
``batching_type=BatchingType.KeyBased`` a partition's batch is one per key, each its own entry
(``sluice.batching``).  A send that cannot reach Redis, or whose slot no Redis Cluster master
serves for the moment (a failover under way), is retried until ``send_timeout_millis`` and
then fails with ``Timeout``.

``send_async`` never waits for Redis: it hands the message (or a full batch) to the producer's
sender thread, which writes entries one at a time, in order.  What waits there counts against
``max_pending_messages`` (on a partitioned topic, per partition, at most
``max_pending_messages_across_partitions`` divided by the partitions); when that is full,
``send_async`` waits for room with ``block_if_queue_full``, else its callback gets
``Result.ProducerQueueIsFull`` at once (``send`` raises ``ProducerQueueIsFull``), as in
pulsar-client.  A ``send`` with nothing queued before it writes from the caller's thread.

A send the topic's backlog quota refuses (``TOO_MANY_REQUESTS``) follows the quota's policy:
``producer_exception`` retries on the ``sluice.backoff`` curve and raises
``ProducerBlockedQuotaExceededException`` after ``max_send_attempts`` attempts;
``producer_request_hold`` keeps trying (at least once a second) until there is room, and raises
``ProducerBlockedQuotaExceededError`` (a ``Timeout``) when the send timeout passes first.

A send over the topic's publish rate (per partition per second) is not written: the producer
waits until the partition's rate window ends and sends again, as often as it takes, so sends
are slowed, not failed, as Pulsar slows a producer by not reading from its connection; only
``send_timeout_millis`` ends the wait (``Timeout``).  ``publish_throttled_count()`` counts the
sends that waited.

A producer registers on every partition of its topic (``sluice.registration``): creating one
over ``maxProducersPerTopic`` raises ``ProducerBusy``.  A message larger than the partition's
``maxMessageSize`` fails with ``MessageTooBig`` without being sent; with batching, a batch is
sent before it would grow past that size, and ``produce.lua`` checks every entry again.

Durable acknowledgements (``sluice.durable``): when the namespace's ``durableAcks`` policy or
the producer's ``durable_ack_replicas`` asks for replicas (the more of the two counts), a send
returns only once that many replicas of the partition's Redis master confirmed its entry (one
``WAIT`` per entry, a batch being one entry); not confirmed within the timeout, it fails with
``Timeout`` (``Result.Timeout``), never reported as stored.
"""

from __future__ import annotations

import functools
import os
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import timedelta
from enum import Enum
from typing import TYPE_CHECKING

import orjson
from redis.exceptions import AuthenticationError as RedisAuthenticationError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from sluice.backoff import Backoff, Clock
from sluice.batching import BatchContainer, BatchingType
from sluice.delivery import delivery_time
from sluice.durable import NONE, TOPOLOGY_ERRORS, Durability, DurableWriter
from sluice.errors import (
    AlreadyClosed,
    InvalidConfiguration,
    MessageTooBig,
    NotSupported,
    ProducerBlockedQuotaExceededError,
    ProducerBlockedQuotaExceededException,
    ProducerQueueIsFull,
    Timeout,
)
from sluice.group_publish import GroupPublishGate
from sluice.message import MessageId
from sluice.priority import DEFAULT_PRIORITY, PRIORITY_FIELD, check_priority
from sluice.protocol.abuse import DURABLE_ACKS_REQUIRED, PUBLISH_RATE_LIMITED
from sluice.protocol.frames import pack_batch
from sluice.protocol.names import TopicName
from sluice.protocol.scripts import PRODUCE_SCRIPT, produce_head
from sluice.refusals import refusal, session_ended
from sluice.registration import ProducerRegistration
from sluice.routing import PartitionsRoutingMode, Router

if TYPE_CHECKING:
    from sluice.client import Client


class Result(Enum):
    """Outcome passed to ``send_async`` callbacks (as ``pulsar.Result``)."""

    Ok = 0
    Timeout = 1
    AlreadyClosed = 2
    UnknownError = 3
    ProducerBlockedQuotaExceededError = 4
    ProducerBlockedQuotaExceededException = 5
    MessageTooBig = 6
    ProducerQueueIsFull = 7


QUOTA_REFUSED = "TOO_MANY_REQUESTS"
THROTTLED = PUBLISH_RATE_LIMITED + " "
DURABLE = DURABLE_ACKS_REQUIRED + " "
HOLD = "producer_request_hold"
HOLD_POLL_MAX_SECONDS = 1.0  # the worker re-checks quotas about once a second
# Bytes a message adds to a batch entry beyond its payload, key and properties (msgpack
# headers, event time), counted high so a batch never grows past maxMessageSize.
BATCH_MESSAGE_OVERHEAD = 32


SendCallback = Callable[[Result, MessageId | None], None]


@dataclass(slots=True)
class _Pending:
    payload: bytes
    key: str | None
    properties: str | None
    event_time: int | None
    sequence: int = -1
    deliver_at: int | None = None  # ms since the epoch (delayed delivery)
    ordering_key: str | None = None  # Key_Shared routes by it before the partition key
    priority: int = DEFAULT_PRIORITY  # stored only when not the default
    future: Future = field(default_factory=Future)


@dataclass(slots=True)
class _Target:
    index: int
    name: TopicName
    keys: list[str]  # produce.lua's KEYS, and the ARGV every call starts with
    head: list
    batch: BatchContainer[_Pending]  # the messages waiting to be batched
    pending: int = 0  # messages accepted and not yet stored or failed

    @classmethod
    def of(cls, index: int, name: TopicName, batching_type: BatchingType) -> _Target:
        """Partition ``name`` (``index``, -1 on a non-partitioned topic), nothing batched."""
        return cls(
            index,
            name,
            PRODUCE_SCRIPT.keys(name),
            produce_head(name),
            BatchContainer(batching_type),
        )


class Producer:
    """Publishes messages to one topic."""

    def __init__(
        self,
        client: Client,
        topic: TopicName,
        partitions: int,
        *,
        producer_name: str | None,
        send_timeout_ms: int,
        batching: bool,
        batching_type: BatchingType = BatchingType.Default,
        batch_max_messages: int,
        batch_max_bytes: int,
        batch_delay_ms: int,
        routing_mode: PartitionsRoutingMode,
        router: Callable[[object, int], int] | None,
        properties: dict[str, str],
        backoff: Backoff | None = None,
        max_send_attempts: int = 3,
        clock: Clock | None = None,
        initial_sequence_id: int | None = None,
        max_pending_messages: int = 1000,
        max_pending_messages_across_partitions: int = 50_000,
        block_if_queue_full: bool = False,
        durability: Durability = NONE,
    ) -> None:
        _check_limits(
            max_send_attempts, max_pending_messages, max_pending_messages_across_partitions
        )
        self._durable = DurableWriter(client, durability)
        self._client, self._topic = client, topic
        self._name = producer_name or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self._send_timeout = send_timeout_ms / 1000 if send_timeout_ms > 0 else float("inf")
        self._router = Router(partitions, routing_mode, router)
        names = [topic.partition(i) for i in range(partitions)] if partitions else [topic]
        self._targets = [
            _Target.of(i if partitions else -1, n, batching_type) for i, n in enumerate(names)
        ]
        # pulsar-client: each partition's queue holds at most max_pending_messages, and all
        # of them together at most max_pending_messages_across_partitions; 0 is no limit.
        room = max_pending_messages or 0
        if partitions and max_pending_messages_across_partitions:
            share = max(max_pending_messages_across_partitions // partitions, 1)
            room = min(room, share) if room else share
        self._max_pending = room
        self._block_if_full = block_if_queue_full
        self._batching = batching
        self._batch_max_messages = max(1, batch_max_messages)
        self._batch_max_bytes = max(1, batch_max_bytes)
        self._batch_delay = batch_delay_ms / 1000
        first = 0 if initial_sequence_id is None else initial_sequence_id + 1
        self._next_sequence = first
        self._last_sequence = -1 if initial_sequence_id is None else initial_sequence_id
        self._lock = threading.Lock()
        self._closed = False
        # The sender: writes handed over by send_async, in order, one at a time.
        self._room = threading.Condition(self._lock)  # a pending count went down
        self._outbox: deque[tuple[_Target, list[_Pending], bool]] = deque()
        self._outbox_ready = threading.Condition()
        self._writing = False
        self._write_lock = threading.Lock()  # held by whoever writes an entry
        self._sender: threading.Thread | None = None
        self._registration = ProducerRegistration(
            client, names, f"{self._name}:{uuid.uuid4().hex[:8]}"
        )
        self._registration.register()
        self._jobs = [client.ticker.every(client.heartbeat_interval, self._registration.renew)]
        if batching:
            self._jobs.append(
                client.ticker.every(max(self._batch_delay / 2, 0.001), self._flush_due)
            )
        self._properties = properties
        self._backoff = backoff or Backoff()
        self._max_send_attempts = max_send_attempts
        self._clock = clock or Clock()
        self._throttled = 0  # sends that waited for the publish rate

    # --- pulsar-client API ----------------------------------------------------------------

    def topic(self) -> str:
        """The topic's full name."""
        return self._topic.full

    def producer_name(self) -> str:
        """This producer's name."""
        return self._name

    def last_sequence_id(self) -> int:
        """Sequence id of the last message stored, -1 before the first (or the
        ``initial_sequence_id`` the producer was created with)."""
        return self._last_sequence

    def publish_throttled_count(self) -> int:
        """How many sends (entries) waited for the topic's publish rate (Sluice)."""
        return self._throttled

    def send(
        self,
        content: bytes,
        properties: dict[str, str] | None = None,
        partition_key: str | None = None,
        ordering_key: str | None = None,
        sequence_id: int | None = None,
        replication_clusters: list[str] | None = None,
        disable_replication: bool = False,
        event_timestamp: int | None = None,
        deliver_at: int | None = None,
        deliver_after: timedelta | None = None,
        priority: int = DEFAULT_PRIORITY,
    ) -> MessageId:
        """Publish one message and wait until it is stored; return its id.

        ``disable_replication`` has nothing to do: Sluice never replicates.  ``deliver_at``
        (ms since the epoch) or ``deliver_after`` (a ``timedelta`` from now) delays its
        delivery on Shared and Key_Shared subscriptions (``sluice.delivery``); ``ordering_key``
        routes it on Key_Shared subscriptions before ``partition_key``.  ``priority``: 0
        (lowest) to 9 (highest), default 4; a subscription hands out higher priorities first
        (``sluice.priority``); out of range raises ``ValueError``."""
        _check_unsupported(replication_clusters)
        priority = check_priority(priority)
        at = delivery_time(deliver_at, deliver_after)
        future = self._enqueue(
            content,
            properties,
            partition_key,
            event_timestamp,
            sequence_id,
            inline=True,
            deliver_at=at,
            ordering_key=ordering_key,
            priority=priority,
        )
        try:
            return future.result(timeout=self._send_timeout + 1)
        except TimeoutError:
            raise Timeout("send timed out") from None

    def send_async(
        self,
        content: bytes,
        callback: SendCallback | None,
        properties: dict[str, str] | None = None,
        partition_key: str | None = None,
        ordering_key: str | None = None,
        sequence_id: int | None = None,
        replication_clusters: list[str] | None = None,
        disable_replication: bool = False,
        event_timestamp: int | None = None,
        deliver_at: int | None = None,
        deliver_after: timedelta | None = None,
        priority: int = DEFAULT_PRIORITY,
    ) -> None:
        """Publish one message without waiting; ``callback(result, message_id)`` runs once
        it is stored (or failed), on the producer's sender thread.

        Returns at once, unless the pending queue is full and ``block_if_queue_full`` is set
        (then it waits for room); when full without it, ``callback`` gets
        ``Result.ProducerQueueIsFull`` before this returns.  The other arguments are
        ``send``'s (an out-of-range ``priority`` raises ``ValueError`` here)."""
        _check_unsupported(replication_clusters)
        priority = check_priority(priority)
        at = delivery_time(deliver_at, deliver_after)
        try:
            future = self._enqueue(
                content,
                properties,
                partition_key,
                event_timestamp,
                sequence_id,
                inline=False,
                deliver_at=at,
                ordering_key=ordering_key,
                priority=priority,
            )
        except ProducerQueueIsFull:
            if callback is not None:
                callback(Result.ProducerQueueIsFull, None)
            return
        if callback is not None:
            future.add_done_callback(lambda f: _call_back(f, callback))

    def flush(self) -> None:
        """Send every batched message now and wait until everything pending is stored."""
        for target in self._targets:
            self._send_batch(target, force=True)
        self._drain()

    def close(self) -> None:
        """Flush and stop; further sends raise ``AlreadyClosed``."""
        if self._closed:
            return
        self.flush()
        self._closed = True
        with self._outbox_ready:
            self._outbox_ready.notify_all()
        with self._room:
            self._room.notify_all()
        for job in self._jobs:
            self._client.ticker.cancel(job)
        self._registration.unregister()
        self._client._forget(self)

    # --- internals ------------------------------------------------------------------------

    def _enqueue(
        self,
        content,
        properties,
        key,
        event_time,
        sequence_id,
        inline,
        deliver_at=None,
        ordering_key=None,
        priority=DEFAULT_PRIORITY,
    ) -> Future:
        if self._closed:
            raise AlreadyClosed("producer is closed")
        if not isinstance(content, bytes | bytearray | memoryview):
            raise InvalidConfiguration("content must be bytes")
        if sequence_id is not None and (not isinstance(sequence_id, int) or sequence_id < 0):
            raise InvalidConfiguration("sequence_id must be an integer >= 0")
        merged = {**self._properties, **(properties or {})}
        tracing = self._client.tracing
        span = tracing.send(self._topic.full, merged, len(content)) if tracing else None
        pending = _Pending(
            bytes(content),
            key,
            orjson.dumps(merged).decode() if merged else None,
            event_time,
            deliver_at=deliver_at,
            ordering_key=ordering_key,
            priority=priority,
        )
        if tracing and span is not None:
            tracing.sent(span, pending.future)
        target = self._targets[max(self._router.choose(key, content), 0)]
        max_size = self._registration.max_message_size(target.name)
        if len(pending.payload) > max_size:
            pending.future.set_exception(
                MessageTooBig(
                    f"a message of {len(pending.payload)} bytes exceeds maxMessageSize "
                    f"({max_size} bytes) of {target.name.full}"
                )
            )
            return pending.future
        self._take_room(target, pending, sequence_id)
        if not self._batching or deliver_at is not None:
            # A delayed message is never batched (as in pulsar-client).
            if inline:
                with self._write_lock:
                    if not self._outbox:
                        # Nothing queued before it: written from the caller's thread.
                        self._write(target, [pending], batched=False)
                        return pending.future
            self._submit(target, [[pending]], batched=False)
            return pending.future
        size = (
            len(pending.payload)
            + len(key or "")
            + len(pending.properties or "")
            + BATCH_MESSAGE_OVERHEAD
        )
        container = target.batch
        group = container.group_key(key, ordering_key)
        joined = container.group(group)
        if container and container.size + size > max_size:
            # Sent before it is too big (with key-based batching, every key's batch: the
            # limits are the container's, as in pulsar-client).
            self._send_batch(target, force=True)
        elif joined and joined[0].priority != priority:
            self._send_batch(target, force=True)  # a batch holds one priority
        batch_limit = min(self._batch_max_bytes, max_size)
        with self._lock:
            container.add(group, pending, size, time.monotonic())
            full = container.count >= self._batch_max_messages or container.size >= batch_limit
        if full or inline:
            # A blocking send does not wait out the batch delay: it sends the batch it joined
            # (as Pulsar's Java client flushes on a synchronous send).
            self._send_batch(target, force=True)
        return pending.future

    def _take_room(self, target: _Target, pending: _Pending, sequence_id: int | None) -> None:
        """Count the message against the pending queue (waiting for room when so configured)
        and give it its sequence id, in the order of acceptance."""
        with self._room:
            limit = self._max_pending
            while limit and target.pending >= limit:
                if not self._block_if_full:
                    raise ProducerQueueIsFull(
                        f"the producer's pending queue of {target.name.full} is full "
                        f"({limit} messages)"
                    )
                if self._closed:
                    raise AlreadyClosed("producer is closed")
                self._room.wait(1.0)
            target.pending += 1
            if sequence_id is None:
                sequence_id = self._next_sequence
            self._next_sequence = max(self._next_sequence, sequence_id + 1)
            pending.sequence = sequence_id

    def _flush_due(self) -> None:
        now = time.monotonic()
        for target in self._targets:
            if target.batch and now - target.batch.started >= self._batch_delay:
                self._send_batch(target, force=True)

    def _send_batch(self, target: _Target, force: bool) -> None:
        with self._lock:
            # Taken and handed over under one lock, so a batch taken later never goes first.
            batches = target.batch.take()  # one entry per key with key-based batching
            if batches:
                self._submit(target, batches, batched=True)

    def _submit(self, target: _Target, entries: list[list[_Pending]], batched: bool) -> None:
        """Hand entries to the sender thread (started on first use), to be written in order."""
        with self._outbox_ready:
            self._outbox.extend((target, messages, batched) for messages in entries)
            if self._sender is None:
                self._sender = threading.Thread(
                    target=self._send_loop, name=f"sluice-producer-{self._name}", daemon=True
                )
                self._sender.start()
            self._outbox_ready.notify_all()

    def _send_loop(self) -> None:
        while True:
            with self._outbox_ready:
                while not self._outbox:
                    if self._closed:
                        return
                    self._outbox_ready.wait(1.0)
            with self._write_lock:
                with self._outbox_ready:
                    if not self._outbox:
                        continue
                    target, messages, batched = self._outbox.popleft()
                    self._writing = True
                try:
                    self._write(target, messages, batched)
                except Exception as exc:  # never lose the thread: fail the entry instead
                    for m in messages:
                        if not m.future.done():
                            m.future.set_exception(exc)
                finally:
                    with self._outbox_ready:
                        self._writing = False
                        self._outbox_ready.notify_all()

    def _drain(self) -> None:
        """Wait until the sender has written everything handed to it so far."""
        with self._outbox_ready:
            while self._outbox or self._writing:
                self._outbox_ready.wait(1.0)

    def _release(self, target: _Target, count: int) -> None:
        with self._room:
            target.pending -= count
            self._room.notify_all()

    def _write(self, target: _Target, messages: list[_Pending], batched: bool) -> None:
        sequence = messages[0].sequence
        common = ["pr", self._name, "sq", str(sequence)]
        if batched and len(messages) > 1:
            payload = pack_batch([(m.payload, m.key, m.properties, m.event_time) for m in messages])
            fields = ["d", payload, "n", str(len(messages)), *common]
            # The entry's keys are its first message's: Key_Shared routes the entry by them.
            first = messages[0]
            if first.key:
                fields += ["k", first.key]
            if first.ordering_key:
                fields += ["o", first.ordering_key]
            if first.priority != DEFAULT_PRIORITY:
                fields += [PRIORITY_FIELD, str(first.priority)]
        else:
            [only] = messages
            fields = ["d", only.payload, *common]
            if only.key:
                fields += ["k", only.key]
            if only.properties:
                fields += ["p", only.properties]
            if only.event_time:
                fields += ["e", str(only.event_time)]
            if only.deliver_at is not None:
                fields += ["a", str(only.deliver_at)]
            if only.ordering_key:
                fields += ["o", only.ordering_key]
            if only.priority != DEFAULT_PRIORITY:
                fields += [PRIORITY_FIELD, str(only.priority)]
        args = [*target.head, 1, len(fields) // 2, *fields]
        try:
            [entry_id] = self._call_with_retry(target.keys, args, target.name)
        except Exception as exc:
            self._release(target, len(messages))
            for m in messages:
                m.future.set_exception(exc)
            return
        # Key-based batches are written in the order of their first messages, so an entry's
        # last sequence id may be below one already stored: the highest stays (as in Pulsar's
        # Java client).
        self._last_sequence = max(self._last_sequence, max(m.sequence for m in messages))
        self._release(target, len(messages))
        stream_id = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
        for index, m in enumerate(messages):
            batch_index = index if batched and len(messages) > 1 else -1
            m.future.set_result(
                MessageId.from_stream_id(stream_id, target.index, batch_index, target.name.full)
            )

    def _call_with_retry(self, script_keys: list[str], args: list, partition: TopicName) -> list:
        clock = self._clock
        deadline = clock.now() + self._send_timeout
        delay = 0.05
        attempts = 0
        quota_delays = None
        throttled = False
        while True:
            attempts += 1
            try:
                return self._store(script_keys, args, partition)
            except RedisAuthenticationError as exc:
                raise session_ended(exc) from None
            except (RedisConnectionError, RedisTimeoutError, *TOPOLOGY_ERRORS) as exc:
                if clock.now() + delay > deadline:
                    raise Timeout(f"send timed out: {exc}") from None
                clock.sleep(delay)
                delay = min(delay * 2, 1.0)
            except ResponseError as exc:
                text = str(exc)
                if text.startswith(DURABLE):
                    # The partition asks for replicas: learnt, and sent again waiting for them.
                    replicas, timeout_ms = text.removeprefix(DURABLE).split()[:2]
                    self._registration.learn_durability(partition, int(replicas), int(timeout_ms))
                    attempts -= 1
                    continue
                if text.startswith(THROTTLED):
                    # Slowed, not failed: wait for the next window, as often as it takes.
                    wait_ms, _, reason = text.removeprefix(THROTTLED).partition(" ")
                    wait = max(int(wait_ms), 1) / 1000
                    if clock.now() + wait > deadline:
                        raise Timeout(
                            f"send timed out: held by the publish rate of {partition.full} "
                            f"({reason})"
                        ) from None
                    if not throttled:
                        throttled = True
                        with self._lock:
                            self._throttled += 1
                    clock.sleep(wait)
                    attempts -= 1  # waiting for the rate is not a failed attempt
                    continue
                if not text.startswith(QUOTA_REFUSED):
                    raise refusal(exc, partition.full, "produce") or exc from None
                policy, _, reason = text.removeprefix(QUOTA_REFUSED).strip().partition("\t")
                if quota_delays is None:
                    quota_delays = self._backoff.delays()
                wait = next(quota_delays)
                if policy == HOLD:
                    wait = min(wait, HOLD_POLL_MAX_SECONDS)
                    if clock.now() + wait > deadline:
                        raise ProducerBlockedQuotaExceededError(
                            f"{QUOTA_REFUSED}: {reason}; send held past its timeout"
                        ) from None
                elif attempts >= self._max_send_attempts or clock.now() + wait > deadline:
                    raise ProducerBlockedQuotaExceededException(
                        f"{QUOTA_REFUSED}: {reason} (gave up after {attempts} attempts)"
                    ) from None
                clock.sleep(wait)

    @functools.cached_property
    def _group_publish(self) -> GroupPublishGate:
        """The resource-group publish limits of this producer's partitions."""
        return GroupPublishGate(self._client.redis, self._client.scripts)

    def _store(self, script_keys: list[str], args: list, partition: TopicName) -> list:
        """One ``produce.lua`` call, followed by ``WAIT`` on its connection when the partition
        or the producer asks for replicas (``produce.lua`` refuses a call that promises fewer
        than the partition's policy)."""
        self._group_publish.take(partition, args)  # the resource group's publish rate, if any
        durability = self._durable.asked.stricter(self._registration.durability(partition))
        script = self._client.scripts[PRODUCE_SCRIPT.name]
        args = [*args, durability.replicas]
        if not durability.replicas:
            return script(keys=script_keys, args=args)
        return self._durable.call(script.sha, script_keys, args, durability)


def _check_limits(attempts: int, pending: int, pending_across: int) -> None:
    if attempts < 1:
        raise InvalidConfiguration("max_send_attempts must be >= 1")
    if pending < 0 or pending_across < 0:
        raise InvalidConfiguration("max_pending_messages must be >= 0 (0: no limit)")


def _check_unsupported(replication_clusters: list[str] | None) -> None:
    """pulsar-client arguments of ``send`` Sluice does not implement: refused, never dropped."""
    if replication_clusters is not None:
        raise NotSupported("replication_clusters is not supported: Sluice does not replicate")


def _call_back(future: Future, callback: SendCallback) -> None:
    error = future.exception()
    if error is None:
        callback(Result.Ok, future.result())
    elif isinstance(error, ProducerBlockedQuotaExceededError):
        callback(Result.ProducerBlockedQuotaExceededError, None)
    elif isinstance(error, ProducerBlockedQuotaExceededException):
        callback(Result.ProducerBlockedQuotaExceededException, None)
    elif isinstance(error, MessageTooBig):
        callback(Result.MessageTooBig, None)
    elif isinstance(error, ProducerQueueIsFull):
        callback(Result.ProducerQueueIsFull, None)
    elif isinstance(error, Timeout):
        callback(Result.Timeout, None)
    else:
        callback(Result.UnknownError, None)
