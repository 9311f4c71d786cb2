"""The producer: routes messages to partitions and appends them, one entry or one batch each.

Mirrors ``pulsar.Producer``: ``send`` (blocking, returns the ``MessageId``), ``send_async``
(callback ``(result, message_id)``), ``flush``, ``close``.  With batching enabled several
messages of one partition share one stream entry; the batch goes out when it is full or
``batching_max_publish_delay_ms`` after its first message.  A send that cannot reach Redis is
retried until ``send_timeout_millis`` and then fails with ``Timeout``.

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
"""

from __future__ import annotations

import itertools
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import timedelta
from enum import Enum
from typing import TYPE_CHECKING, Any

import orjson
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from sluice.backoff import Backoff, Clock
from sluice.delivery import delivery_time
from sluice.errors import (
    AlreadyClosed,
    InvalidConfiguration,
    MessageTooBig,
    ProducerBlockedQuotaExceededError,
    ProducerBlockedQuotaExceededException,
    Timeout,
)
from sluice.message import MessageId
from sluice.protocol import keys
from sluice.protocol.abuse import PUBLISH_RATE_LIMITED
from sluice.protocol.frames import pack_batch, produce_keys, wake_data
from sluice.protocol.names import TopicName
from sluice.refusals import refusal
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


QUOTA_REFUSED = "TOO_MANY_REQUESTS"
THROTTLED = PUBLISH_RATE_LIMITED + " "
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
    deliver_at: int | None = None  # ms since the epoch (delayed delivery)
    ordering_key: str | None = None  # Key_Shared routes by it before the partition key
    future: Future = field(default_factory=Future)


@dataclass(slots=True)
class _Target:
    index: int
    name: TopicName
    keys: list[str]
    wake: str
    batch: list[_Pending] = field(default_factory=list)
    batch_bytes: int = 0
    batch_started: float = 0.0


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
        batch_max_messages: int,
        batch_max_bytes: int,
        batch_delay_ms: int,
        routing_mode: PartitionsRoutingMode,
        router: Callable[[object, int], int] | None,
        properties: dict[str, str],
        backoff: Backoff | None = None,
        max_send_attempts: int = 3,
        clock: Clock | None = None,
    ) -> None:
        if max_send_attempts < 1:
            raise InvalidConfiguration("max_send_attempts must be >= 1")
        self._client = client
        self._topic = topic
        self._name = producer_name or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self._send_timeout = send_timeout_ms / 1000 if send_timeout_ms > 0 else float("inf")
        self._router = Router(partitions, routing_mode, router)
        names = [topic.partition(i) for i in range(partitions)] if partitions else [topic]
        self._targets = [
            _Target(
                i if partitions else -1,
                name,
                produce_keys(name),
                wake_data(name.full),
            )
            for i, name in enumerate(names)
        ]
        self._batching = batching
        self._batch_max_messages = max(1, batch_max_messages)
        self._batch_max_bytes = max(1, batch_max_bytes)
        self._batch_delay = batch_delay_ms / 1000
        self._sequence = itertools.count()
        self._last_sequence = -1
        self._lock = threading.Lock()
        self._closed = False
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
        """Sequence id of the last message sent, -1 before the first."""
        return self._last_sequence

    def publish_throttled_count(self) -> int:
        """How many sends (entries) waited for the topic's publish rate (Sluice)."""
        return self._throttled

    def send(
        self,
        content: bytes,
        properties: dict[str, str] | None = None,
        partition_key: str | None = None,
        sequence_id: int | None = None,
        event_timestamp: int | None = None,
        deliver_at: int | None = None,
        deliver_after: timedelta | None = None,
        ordering_key: str | None = None,
        **_pulsar_options: Any,
    ) -> MessageId:
        """Publish one message and wait until it is stored; return its id.

        ``deliver_at`` (ms since the epoch) or ``deliver_after`` (a ``timedelta`` from now)
        delays its delivery on Shared and Key_Shared subscriptions (``sluice.delivery``)."""
        at = delivery_time(deliver_at, deliver_after)
        future = self._enqueue(
            content, properties, partition_key, event_timestamp, at, ordering_key
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
        sequence_id: int | None = None,
        event_timestamp: int | None = None,
        deliver_at: int | None = None,
        deliver_after: timedelta | None = None,
        ordering_key: str | None = None,
        **_pulsar_options: Any,
    ) -> None:
        """Publish one message; ``callback(result, message_id)`` runs once it is stored."""
        at = delivery_time(deliver_at, deliver_after)
        future = self._enqueue(
            content, properties, partition_key, event_timestamp, at, ordering_key
        )
        if callback is not None:
            future.add_done_callback(lambda f: _call_back(f, callback))

    def flush(self) -> None:
        """Send every batched message now and wait for them."""
        for target in self._targets:
            self._send_batch(target, force=True)

    def close(self) -> None:
        """Flush and stop; further sends raise ``AlreadyClosed``."""
        if self._closed:
            return
        self.flush()
        self._closed = True
        for job in self._jobs:
            self._client.ticker.cancel(job)
        self._registration.unregister()
        self._client._forget(self)

    # --- internals ------------------------------------------------------------------------

    def _enqueue(
        self, content, properties, key, event_time, deliver_at=None, ordering_key=None
    ) -> Future:
        if self._closed:
            raise AlreadyClosed("producer is closed")
        if not isinstance(content, bytes | bytearray | memoryview):
            raise InvalidConfiguration("content must be bytes")
        merged = {**self._properties, **(properties or {})}
        pending = _Pending(
            bytes(content),
            key,
            orjson.dumps(merged).decode() if merged else None,
            event_time,
            deliver_at,
            ordering_key,
        )
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
        if not self._batching or deliver_at is not None:
            # A delayed message is never batched (as in pulsar-client).
            self._write(target, [pending], batched=False)
            return pending.future
        size = (
            len(pending.payload)
            + len(key or "")
            + len(pending.properties or "")
            + BATCH_MESSAGE_OVERHEAD
        )
        if target.batch and target.batch_bytes + size > max_size:
            self._send_batch(target, force=True)  # the batch is sent before it is too big
        batch_limit = min(self._batch_max_bytes, max_size)
        with self._lock:
            if not target.batch:
                target.batch_started = time.monotonic()
            target.batch.append(pending)
            target.batch_bytes += size
            full = (
                len(target.batch) >= self._batch_max_messages or target.batch_bytes >= batch_limit
            )
        if full:
            self._send_batch(target, force=True)
        return pending.future

    def _flush_due(self) -> None:
        now = time.monotonic()
        for target in self._targets:
            if target.batch and now - target.batch_started >= self._batch_delay:
                self._send_batch(target, force=True)

    def _send_batch(self, target: _Target, force: bool) -> None:
        with self._lock:
            batch, target.batch, target.batch_bytes = target.batch, [], 0
        if batch:
            self._write(target, batch, batched=True)

    def _write(self, target: _Target, messages: list[_Pending], batched: bool) -> None:
        sequence = next(self._sequence)
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
        args = [keys.WAKE_CHANNEL, target.wake, 1, len(fields) // 2, *fields]
        try:
            [entry_id] = self._call_with_retry(target.keys, args, target.name)
        except Exception as exc:
            for m in messages:
                m.future.set_exception(exc)
            return
        self._last_sequence = sequence
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
                return self._client.scripts["produce"](keys=script_keys, args=args)
            except (RedisConnectionError, RedisTimeoutError) as exc:
                if clock.now() + delay > deadline:
                    raise Timeout(f"send timed out: {exc}") from None
                clock.sleep(delay)
                delay = min(delay * 2, 1.0)
            except ResponseError as exc:
                text = str(exc)
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
                    raise refusal(exc) or exc from None
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
    elif isinstance(error, Timeout):
        callback(Result.Timeout, None)
    else:
        callback(Result.UnknownError, None)
