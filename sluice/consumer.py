"""The consumer: receives from its receiver queues and acknowledges, as ``pulsar.Consumer``.

A worker pushes entries into this consumer's queue on every partition while it has permits
(``receiver_queue_size`` per partition, given back as the application receives, half a queue
at a time, like Pulsar's flow control).  Acknowledgements are grouped and sent every 100 ms;
negative acks and ack timeouts schedule redelivery; after ``max_redeliver_count`` redeliveries
a message goes to the dead-letter topic.  Closing releases everything not yet acknowledged to
the other consumers.  Bookkeeping state lives in ``sluice.consumer_state``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, cast

import orjson
from redis.exceptions import AuthenticationError as RedisAuthenticationError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoPermissionError, NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from sluice import heartbeats
from sluice.consumer_state import AckTracker, Part
from sluice.durable import TOPOLOGY_ERRORS
from sluice.errors import (
    AlreadyClosed,
    AuthorizationError,
    InvalidConfiguration,
    NotSupported,
    SluiceException,
    SubscriptionBusy,
    Timeout,
)
from sluice.keyshared import ConsumerKeySharedPolicy
from sluice.message import EMPTY_PROPERTIES, Message, MessageId
from sluice.priority import DEFAULT_PRIORITY, entry_priority, priority_value
from sluice.protocol import keys
from sluice.protocol.connection import raw_rows
from sluice.protocol.frames import range_notice, unpack_batch, unpack_packets
from sluice.protocol.names import TopicName
from sluice.protocol.scripts import (
    ACK,
    ACK_CUMULATIVE,
    FLOW,
    NACK,
    RELEASE,
    SUBSCRIBE,
    UNSUBSCRIBE,
    ScriptSpec,
    ack_argv,
    flow_argv,
)
from sluice.protocol.text import as_text
from sluice.refusals import denied, refusal, session_ended

if TYPE_CHECKING:
    from sluice.client import Client
    from sluice.producer import Producer

log = logging.getLogger(__name__)

ACK_GROUP_SECONDS = 0.1
ACK_GROUP_MAX = 1000
DEFAULT_CONSUMER_TIMEOUT_MS = 10_000


class ConsumerType(Enum):
    """Subscription types."""

    Exclusive = "Exclusive"
    Shared = "Shared"
    Failover = "Failover"
    KeyShared = "Key_Shared"


class InitialPosition(Enum):
    """Where a new subscription starts."""

    Latest = "latest"
    Earliest = "earliest"


@dataclass(frozen=True, slots=True)
class DeadLetterPolicy:
    """After ``max_redeliver_count`` redeliveries a message goes to ``dead_letter_topic``
    (default ``{topic}-{subscription}-DLQ``)."""

    max_redeliver_count: int
    dead_letter_topic: str | None = None
    initial_subscription_name: str | None = None


class Consumer:
    """Receives messages of one subscription on one or more topics."""

    _turn = -1  # the queue a cluster consumer waits on next (``_pop``)

    def __init__(
        self,
        client: Client,
        topics: list[str],
        partitions: list[TopicName],
        subscription: str,
        *,
        consumer_type: ConsumerType,
        permits: int,
        consumer_name: str | None,
        ack_timeout_ms: int,
        nack_delay_ms: int,
        dead_letter_policy: DeadLetterPolicy | None,
        initial_position: InitialPosition,
        key_shared_policy: ConsumerKeySharedPolicy | None = None,
    ) -> None:
        if key_shared_policy is not None and consumer_type is not ConsumerType.KeyShared:
            raise InvalidConfiguration("key_shared_policy is for Key_Shared subscriptions")
        if consumer_type is ConsumerType.KeyShared and key_shared_policy is None:
            key_shared_policy = ConsumerKeySharedPolicy()
        self._key_shared = key_shared_policy
        self._client = client
        self._topics = topics
        self._subscription = subscription
        self._type = consumer_type
        self._name = consumer_name or uuid.uuid4().hex[:5]
        self._id = f"{self._name}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._permits = permits
        self._flow_every = max(permits // 2, 1)  # permits go back half a queue at a time
        self._nack_delay_ms = nack_delay_ms
        self._dlq = dead_letter_policy
        self._dlq_producer: Producer | None = None
        self._initial_position = initial_position
        self._buffer: deque[Message] = deque()
        # Elements popped from the receiver queues whose entries are not read yet (``_fetch``).
        self._unread: list[tuple[Part, list[bytes], list]] = []
        self._listener: threading.Thread | None = None
        self._lock = threading.RLock()
        self._closed = False
        # Held by a heartbeat (which registers the consumer again when the worker reaped it)
        # and by unsubscribe, so that a heartbeat never brings back what unsubscribe deleted.
        self._membership = threading.Lock()
        self._leaving = False
        self._timeout_ms = int(
            client.redis.hget(keys.CLIENT_CONFIG, "consumerTimeoutMs")
            or DEFAULT_CONSUMER_TIMEOUT_MS
        )
        self._parts = [Part(i, name, subscription, self._id) for i, name in enumerate(partitions)]
        self._by_queue = {p.queue.encode(): p for p in self._parts}
        self._by_topic = {p.name.full: p for p in self._parts}
        self._acks = AckTracker(ack_timeout_ms, tracking=bool(ack_timeout_ms or dead_letter_policy))
        registered: list[Part] = []
        try:
            for part in self._parts:
                self._register(part)
                registered.append(part)
        except Exception:
            for part in registered:
                self._release(part)
            raise
        ticker = client.ticker
        # Acknowledgements and permits go out within ACK_GROUP_SECONDS of the first pending
        # one (the flush is armed then; an idle consumer costs its client thread nothing).
        self._io_job = ticker.on_demand(self._flush_acks)
        self._flush_armed = False
        # Heartbeats: the client's one job renews every consumer's registrations together
        # (``sluice.heartbeats``).
        self._jobs = [self._io_job]
        if ack_timeout_ms:
            self._jobs.append(ticker.every(min(ack_timeout_ms / 1000 / 4, 1.0), self._expire))

    # --- pulsar-client API ----------------------------------------------------------------

    def topic(self) -> str:
        """The topic (or the first of the topics) this consumer reads."""
        return self._topics[0]

    def subscription_name(self) -> str:
        """The subscription's name."""
        return self._subscription

    def consumer_name(self) -> str:
        """This consumer's name."""
        return self._name

    def is_connected(self) -> bool:
        """True until closed."""
        return not self._closed

    def receive(self, timeout_millis: int | None = None) -> Message:
        """The next message; ``Timeout`` when none arrives within ``timeout_millis``."""
        if self._listener is not None and threading.current_thread() is not self._listener:
            raise InvalidConfiguration("receive() is not allowed on a consumer with a listener")
        return self._receive(timeout_millis)

    def _receive(self, timeout_millis: int | None) -> Message:
        buffer = self._buffer
        if buffer and not self._closed:
            return self._hand_out(buffer.popleft())
        deadline = None if timeout_millis is None else time.monotonic() + timeout_millis / 1000
        while True:
            self._check_open()
            if buffer:
                return self._hand_out(buffer.popleft())
            wait = 1.0
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    raise Timeout("receive timed out")
            self._fetch(max(wait, 0.001))

    def acknowledge(self, message: Message | MessageId) -> None:
        """Acknowledge one message (sent grouped, within 100 ms)."""
        if self._closed:
            raise AlreadyClosed("consumer is closed")
        if type(message) is Message and message._batch < 0 and not self._acks.tracking:
            # A whole entry no one tracks needs no bookkeeping before it is sent.
            part = self._by_topic.get(message._topic)
            if part is not None:
                pending = part.pending_acks
                pending.append(message._entry)
                if len(pending) >= ACK_GROUP_MAX:
                    self._client.ticker.nudge(self._io_job)
                elif not self._flush_armed:
                    self._arm_flush()
                return
        message_id = self._message_id(message)
        part = self._by_topic.get(message_id.topic) or self._part_of(message_id)
        if (message_id.batch < 0 and not self._acks.tracking) or self._acks.ack(part, message_id):
            part.pending_acks.append(message_id.stream_id)
            if len(part.pending_acks) >= ACK_GROUP_MAX:
                self._client.ticker.nudge(self._io_job)
            elif not self._flush_armed:
                self._arm_flush()

    def acknowledge_cumulative(self, message: Message | MessageId) -> None:
        """Acknowledge this message and every earlier one (Exclusive and Failover only)."""
        self._check_open()
        if self._type is ConsumerType.KeyShared:
            raise NotSupported("Cumulative acknowledge not supported for Key_Shared subscription")
        if self._type is ConsumerType.Shared:
            raise NotSupported("Cumulative acknowledge not supported for shared subscription")
        message_id = self._message_id(message)
        part = self._part_of(message_id)
        self._flush_acks()
        upto = self._acks.cumulative(part, message_id)
        self._send(ACK_CUMULATIVE, part.name, self._subscription, self._id, upto)

    def negative_acknowledge(self, message: Message | MessageId) -> None:
        """Ask for redelivery after ``negative_ack_redelivery_delay_ms``."""
        self._check_open()
        self._redeliver([self._message_id(message)], self._nack_delay_ms)

    def redeliver_unacknowledged_messages(self) -> None:
        """Redeliver every message received and not acknowledged."""
        self._check_open()
        self._flush_acks()
        if self._acks.tracking:
            self._redeliver(self._acks.all_unacked(), 0)
            return
        # Not tracked here: the server knows what this consumer holds.
        for part in self._parts:
            pending = [
                p
                for stream in self._streams(part)
                for p in self._client.redis.xpending_range(
                    stream, self._subscription, "-", "+", 100_000, consumername=self._id
                )
            ]
            ids = [
                MessageId(
                    as_text(cast(bytes, p["message_id"])), part.index_in_topic, -1, part.topic
                )
                for p in pending
            ]
            if ids:
                self._redeliver(ids, 0)

    def unsubscribe(self) -> None:
        """Delete the subscription (fails while other consumers are connected)."""
        self._check_open()
        self._flush_acks()
        with self._membership:
            self._leaving = True  # no heartbeat registers the consumer again from here on
            try:
                for part in self._parts:
                    try:
                        deleted = self._send(
                            UNSUBSCRIBE,
                            part.name,
                            self._subscription,
                            self._id,
                            _now_ms(),
                            self._timeout_ms,
                        )
                    except ResponseError as exc:
                        raise SubscriptionBusy(str(exc).split(" ", 1)[-1]) from None
                    if deleted:
                        field = f"{part.name.base.full}#{self._subscription}"
                        self._client.redis.hset(keys.TOMBSTONES, field, _now_ms())
            except BaseException:
                self._leaving = False  # still subscribed: it goes on heartbeating
                raise
        self._shutdown(release=False)

    def close(self) -> None:
        """Stop; what was received and not acknowledged is redelivered to other consumers."""
        if self._closed:
            return
        self._flush_acks()
        self._shutdown(release=True)

    # --- receiving ------------------------------------------------------------------------

    def _listen(self, listener: Callable[[Consumer, Message], None]) -> None:
        """Call ``listener(self, message)`` for every message, on a thread of its own, until
        closed (pulsar-client's ``message_listener``); an exception it raises is logged."""

        def run() -> None:
            while not self._closed:
                try:
                    message = self._receive(200)
                except (Timeout, AlreadyClosed):
                    continue
                try:
                    listener(self, message)
                except Exception:
                    log.exception("message listener of %s failed", self._subscription)

        self._listener = threading.Thread(
            target=run, name=f"sluice-listener-{self._name}", daemon=True
        )
        self._listener.start()

    def _fetch(self, block_seconds: float) -> None:
        """Move what the receiver queues hold into the buffer.  A popped element is gone from
        Redis, so it is kept (``_unread``) until the entries it names have been read: a
        connection lost between the pop and the read (a master that dies, a failover) leaves
        it for the next call, never dropped -- its entries are pending to this consumer and
        nothing else would deliver them while it lives."""
        try:
            if not self._unread:
                queues = [p.queue for p in self._parts]
                self._unread = [
                    (self._by_queue[queue], elements, [range_notice(raw) for raw in elements])
                    for queue, elements in self._pop(queues, block_seconds)
                ]
            received = [(*popped, self._read_ranges(*popped)) for popped in self._unread]
        except RedisAuthenticationError as exc:
            raise session_ended(exc) from None
        except (RedisConnectionError, RedisTimeoutError, *TOPOLOGY_ERRORS):
            time.sleep(min(block_seconds, 0.5))
            return
        except NoPermissionError as exc:
            raise self._denied(exc) from None
        self._unread = []
        messages: list[Message] = []
        for part, elements, notices, fetched in received:
            for raw, notice in zip(elements, notices, strict=True):
                if notice is None:
                    packet = unpack_packets(raw)
                    if packet and len(packet[0]) == 2:
                        # New entries handed whole: (id, fields) pairs, as XRANGE gives them.
                        self._decode_new(part, packet, messages)
                    else:
                        self._decode(part, packet, messages)
                else:
                    self._decode_new(part, next(fetched), messages)
        with self._lock:
            self._buffer.extend(messages)

    def _read_ranges(self, part: Part, elements: list[bytes], notices: list) -> Iterator:
        """The entries of the notices' ranges (new entries: read where they are, in one round
        trip), one list per range, in order."""
        ranges = [n for n in notices if n is not None]
        if not ranges:
            return iter(())
        pipe = self._client.raw_redis.pipeline(transaction=False)
        for first, last in ranges:
            # An entry of a priority level's own stream names it in its id (keys.stream_of).
            pipe.execute_command("XRANGE", keys.stream_of(part.log, first), first, last)
        rows = pipe.execute()
        return iter(raw_rows(rows) if self._client.cluster else rows)

    def _pop(self, queues: list, block_seconds: float) -> list[tuple[bytes, list[bytes]]]:
        """Take what the receiver queues hold: from one of them, waiting up to
        ``block_seconds`` for it (one call on one server).  On a Redis Cluster the queues of
        different partitions live in different slots, which one call cannot wait on: every
        queue is emptied without waiting (a pipeline), and only when all are empty does the
        call wait, briefly, on one of them in turn."""
        redis = self._client.redis
        if not self._client.cluster or len(queues) == 1:
            reply = redis.blmpop(
                block_seconds, len(queues), *queues, direction="LEFT", count=self._permits
            )
            return [cast(tuple[bytes, list[bytes]], reply)] if reply else []
        pipe = redis.pipeline(transaction=False)
        for queue in queues:
            pipe.lmpop(1, queue, direction="LEFT", count=self._permits)
        # A node that fails (a master killed mid-pipeline) must not cost what the others
        # popped: their elements are gone from Redis once popped, so they are returned, and
        # the failed queues are tried again on the next call.
        replies = pipe.execute(raise_on_error=False)
        popped = [
            cast(tuple[bytes, list[bytes]], r)
            for r in replies
            if r and not isinstance(r, Exception)
        ]
        failed = [r for r in replies if isinstance(r, Exception)]
        for error in failed:
            if not isinstance(error, (RedisConnectionError, RedisTimeoutError, *TOPOLOGY_ERRORS)):
                raise error
        if popped:
            return popped
        if failed:
            raise failed[0]
        self._turn = (self._turn + 1) % len(queues)
        reply = redis.blmpop(
            min(block_seconds, 0.05), 1, queues[self._turn], direction="LEFT", count=self._permits
        )
        return [cast(tuple[bytes, list[bytes]], reply)] if reply else []

    def _decode_new(self, part: Part, rows: list, out: list[Message]) -> None:
        """Append the messages of new entries as XRANGE returned them, or a packet of new
        entries (first deliveries: the fast path's runs, the priority index's entries)."""
        topic = part.topic
        index = part.index_in_topic
        append = out.append
        for entry_id, flat in rows:
            if len(flat) == 4 and flat[0] == b"t" and flat[2] == b"d":
                # The common entry: publish time and payload, nothing else.
                append(Message(flat[3], entry_id.decode(), index, topic, flat[1]))
            elif len(flat) == 6 and flat[0] == b"t" and flat[2] == b"d" and flat[4] == b"k":
                # A keyed one: publish time, payload and key.
                append(
                    Message(flat[3], entry_id.decode(), index, topic, flat[1], 0, flat[5].decode())
                )
            elif len(flat) == 6 and flat[0] == b"t" and flat[2] == b"d" and flat[4] == b"u":
                # Publish time, payload and a priority other than the default (the priority
                # index hands its entries out in packets of new entries).
                append(
                    Message(
                        flat[3],
                        entry_id.decode(),
                        index,
                        topic,
                        flat[1],
                        priority=priority_value(flat[5]),
                    )
                )
            else:
                self._decode_entry(part, entry_id.decode(), flat, 0, out)

    def _decode(self, part: Part, entries: list, out: list[Message]) -> None:
        """Append the messages of a packet of entries with delivery counts (redeliveries, and
        delayed entries come due as first deliveries)."""
        topic = part.topic
        index = part.index_in_topic
        append = out.append
        for entry_id, flat, delivery_count in entries:
            redeliveries = delivery_count - 1 if delivery_count > 1 else 0
            if len(flat) == 4 and flat[0] == b"t" and flat[2] == b"d":
                append(Message(flat[3], entry_id.decode(), index, topic, flat[1], redeliveries))
            elif len(flat) == 6 and flat[0] == b"t" and flat[2] == b"d" and flat[4] == b"u":
                # Publish time, payload and a priority other than the default.
                append(
                    Message(
                        flat[3],
                        entry_id.decode(),
                        index,
                        topic,
                        flat[1],
                        redeliveries,
                        priority=priority_value(flat[5]),
                    )
                )
            else:
                self._decode_entry(part, entry_id.decode(), flat, redeliveries, out)

    def _decode_entry(
        self, part: Part, entry: str, flat: list[bytes], redeliveries: int, out: list[Message]
    ) -> None:
        """Append the message(s) of one entry with any fields (key, properties, a batch)."""
        topic = part.topic
        index = part.index_in_topic
        pairs = iter(flat)
        fields = dict(zip(pairs, pairs, strict=False))
        publish = fields.get(b"t", b"0")
        priority = entry_priority(fields) if b"u" in fields else DEFAULT_PRIORITY
        if b"n" in fields:
            batch = unpack_batch(fields[b"d"])
            self._acks.expect_batch(part, entry, len(batch))
            out.extend(
                Message(
                    payload,
                    entry,
                    index,
                    topic,
                    publish,
                    redeliveries,
                    key,
                    orjson.loads(props) if props else EMPTY_PROPERTIES,
                    event or 0,
                    i,
                    len(batch),
                    priority,
                )
                for i, (payload, key, props, event) in enumerate(batch)
            )
            return
        key = fields.get(b"k")
        props = fields.get(b"p")
        event = fields.get(b"e")
        out.append(
            Message(
                fields.get(b"d", b""),
                entry,
                index,
                topic,
                publish,
                redeliveries,
                key.decode() if key is not None else None,
                orjson.loads(props) if props else EMPTY_PROPERTIES,
                int(event) if event is not None else 0,
                priority=priority,
            )
        )

    def _hand_out(self, message: Message) -> Message:
        part = self._by_topic[message.topic_name()]
        if self._client.tracing is not None:
            self._client.tracing.received(part.name.base.full, self._subscription, message)
        if self._acks.tracking:
            self._acks.track(part, message)
        part.received += 1
        if part.received >= self._flow_every:
            # Permits go back from the client's background thread: receiving goes on.
            part.pending_permits.append(part.received)
            part.received = 0
            self._client.ticker.nudge(self._io_job)
        return message

    # --- redelivery, dead letters ---------------------------------------------------------

    def _redeliver(self, message_ids: list[MessageId], delay_ms: int) -> None:
        by_part: dict[int, list[str]] = {}
        for message_id in message_ids:
            part = self._part_of(message_id)
            tracked = self._acks.forget(part, message_id.stream_id)
            if tracked is not None and self._to_dead_letter(part, tracked):
                continue
            by_part.setdefault(part.index, []).append(message_id.stream_id)
        due = _now_ms() + delay_ms
        for index, ids in by_part.items():
            part = self._parts[index]
            self._send(NACK, part.name, self._subscription, due, dict.fromkeys(ids))

    def _to_dead_letter(self, part: Part, messages: list[Message]) -> bool:
        """Send an entry's messages to the DLQ when they were redelivered enough; ack it."""
        if self._dlq is None or messages[0].redelivery_count() < self._dlq.max_redeliver_count:
            return False
        if self._dlq_producer is None:
            topic = self._dlq.dead_letter_topic or f"{part.name.base.full}-{self._subscription}-DLQ"
            self._dlq_producer = self._client.create_producer(topic)
        for m in messages:
            props = {
                **m.properties(),
                "REAL_TOPIC": m.topic_name(),
                "ORIGIN_MESSAGE_ID": str(m.message_id()),
            }
            self._dlq_producer.send(
                m.data(),
                properties=props,
                partition_key=m.partition_key() or None,
                priority=m.priority(),
            )
        part.pending_acks.append(messages[0].message_id().stream_id)
        self._flush_acks()
        return True

    def _expire(self) -> None:
        expired = self._acks.expired(time.monotonic())
        if expired and not self._closed:
            self._redeliver(expired, 0)

    # --- registration, flow, acks ---------------------------------------------------------

    def _register(self, part: Part) -> None:
        info = orjson.dumps(
            {
                "name": self._name,
                "receiverQueueSize": self._permits,
                "since": _now_ms(),
                "type": self._type.value,
                **(self._key_shared.info() if self._key_shared is not None else {}),
            }
        ).decode()
        call = SUBSCRIBE.call(
            part.name,
            self._subscription,
            self._id,
            self._type.value,
            self._initial_position.value,
            _now_ms(),
            info,
            self._timeout_ms,
            consumer_name=self._name,
            client_host=self._client.host,
        )
        try:
            self._call(SUBSCRIBE, *call)
        except AuthorizationError:
            raise
        except ResponseError as exc:
            # ConsumerBusy, SubscriptionBusy, NotAllowedError (maxSubscriptionsPerTopic; its
            # SubscribeRateLimited: the subscribe rate of this consumer name from this host).
            raise refusal(exc) or exc from None
        part.received = 0
        part.pending_permits.clear()  # a whole queue's permits are given now
        self._flow(part, self._permits)

    def _flow_call(self, part: Part, permits: int) -> tuple[list[str], list]:
        argv = flow_argv(part.name, self._subscription, self._id, permits, _now_ms())
        return part.flow_keys, argv

    def _flow(self, part: Part, permits: int) -> bool:
        return bool(self._call(FLOW, *self._flow_call(part, permits)))

    def _heartbeat(self) -> None:
        """This consumer's heartbeat alone (the client's job beats all of them together)."""
        heartbeats.beat(self._client, [self])

    def _beating_parts(self) -> list[Part]:
        """The partitions whose registrations a heartbeat renews now: none once the consumer
        is closing or unsubscribing."""
        if self._closed or self._leaving:
            return []
        return list(self._parts)

    def _beaten(self, part: Part, reply: Any) -> None:
        """What a heartbeat's call on ``part`` answered: 1, or 0 when the workers reaped
        this consumer after missed heartbeats (its messages went to others: it registers
        again, unless it closed or unsubscribed meanwhile), or an error."""
        if reply == 1:
            return
        if isinstance(reply, NoPermissionError):
            log.warning("consumer %s on %s: %s", self._id, part.name.full, self._denied(reply))
            return
        if isinstance(reply, Exception):
            log.warning("consumer %s on %s: heartbeat failed: %s", self._id, part.name.full, reply)
            return
        with self._membership:  # an unsubscribe on its way ends first
            if self._closed or self._leaving:
                return
            try:
                self._register(part)
            except (RedisConnectionError, RedisTimeoutError):
                return
            except SluiceException as exc:
                # Its place went to another consumer meanwhile (a consumer limit): the next
                # heartbeat tries again.
                log.warning("consumer %s on %s: %s", self._id, part.name.full, exc)

    def _arm_flush(self) -> None:
        """Have the pending acknowledgements sent within ACK_GROUP_SECONDS."""
        self._flush_armed = True
        self._client.ticker.arm(self._io_job, ACK_GROUP_SECONDS)

    def _flush_acks(self) -> None:
        """Send pending acknowledgements and permits, in one round trip.

        Runs on the client's background thread (and on explicit flushes); the application's
        threads only append.  Each popleft is atomic, so every id and permit is taken
        exactly once, by one flush.  The armed flag is cleared before anything is taken: an
        acknowledgement appended after this flush took its part arms the next one."""
        self._flush_armed = False
        calls = []
        for part in self._parts:
            permits = _take_all(part.pending_permits)
            if permits:
                calls.append((part, FLOW, sum(permits), permits))
            ids = _take_all(part.pending_acks)
            if ids:
                calls.append((part, ACK, ids, ids))
        if not calls:
            return
        unsent = calls
        try:
            replies = self._send_calls(calls)
            missing = [
                c for c, r in zip(calls, replies, strict=True) if isinstance(r, NoScriptError)
            ]
            if missing:
                # A server without the scripts (one no client used yet, a restart, a failover's
                # new master): load them and send those calls again now, not at a later flush
                # (a closing consumer has none).  The other calls of the pipeline were done.
                unsent = missing
                self._client.reload_scripts()
                replies = self._send_calls(missing)
            for reply in replies:
                if isinstance(reply, Exception):
                    raise reply
        except NoPermissionError as exc:
            # The role lost its grant: these acknowledgements cannot be sent; the entries stay
            # pending and go to another consumer once this one is reaped.
            log.warning("consumer %s: %s", self._id, self._denied(exc))
        except (RedisConnectionError, RedisTimeoutError, NoScriptError):
            for part, script, _value, taken in unsent:
                queue = part.pending_permits if script is FLOW else part.pending_acks
                queue.extendleft(reversed(taken))
            self._arm_flush()  # tried again within ACK_GROUP_SECONDS

    def _send_calls(self, calls: list) -> list:
        """Send these flush calls in one pipeline; their replies (an error as its exception).
        EVALSHA itself: a script object in a pipeline would first ask SCRIPT EXISTS, a round
        trip more per flush; a server without the script answers NOSCRIPT."""
        pipe = self._client.redis.pipeline(transaction=False)
        scripts = self._client.scripts
        for part, script, value, _taken in calls:
            if script is FLOW:
                script_keys, args = self._flow_call(part, value)
            else:
                script_keys = part.ack_keys
                args = ack_argv(part.name, self._subscription, value)
            pipe.evalsha(scripts[script.name].sha, len(script_keys), *script_keys, *args)
        return pipe.execute(raise_on_error=False)

    def _release(self, part: Part) -> None:
        try:
            self._send(RELEASE, part.name, self._subscription, self._id, _now_ms())
        except ResponseError as exc:
            # The subscription is gone from that partition (deleted meanwhile, or its master
            # lost its data): there is nothing left to release there.
            if not str(exc).startswith("NOGROUP"):
                raise

    def _shutdown(self, release: bool) -> None:
        with self._membership:  # a heartbeat on its way ends first; none starts after
            self._closed = True
        for job in self._jobs:
            self._client.ticker.cancel(job)
        if release:
            for part in self._parts:
                # A role that lost its grant cannot release: the consumer's heartbeat stops
                # and the worker reaps it after the consumer timeout.
                with contextlib.suppress(
                    RedisConnectionError, RedisTimeoutError, AuthorizationError, *TOPOLOGY_ERRORS
                ):
                    self._release(part)
        if self._dlq_producer is not None:
            self._dlq_producer.close()
        self._client._forget(self)

    # --- helpers --------------------------------------------------------------------------

    def _send(self, script: ScriptSpec, *params: Any):
        """Call ``script`` with the KEYS and ARGV its spec builds from ``params``."""
        return self._call(script, *script.call(*params))

    def _call(self, script: ScriptSpec, script_keys: list[str], args: list):
        try:
            return self._client.scripts[script.name](keys=script_keys, args=args)
        except NoPermissionError as exc:
            raise self._denied(exc) from None

    def _denied(self, exc: Exception) -> AuthorizationError:
        """The role's grants no longer (or never did) cover this consumer's topics."""
        return denied(", ".join(self._topics), "consume", exc)

    def _streams(self, part: Part) -> list[str]:
        """Every stream of the partition (its priority levels' own, lib/levels.lua)."""
        return keys.level_logs(part.name, self._client.redis.hkeys(keys.levels(part.name)))

    def _message_id(self, message: Message | MessageId) -> MessageId:
        if isinstance(message, Message):
            return message.message_id()
        if isinstance(message, MessageId):
            return message
        raise InvalidConfiguration("expected a Message or a MessageId")

    def _part_of(self, message_id: MessageId) -> Part:
        part = self._by_topic.get(message_id.topic)
        if part is None:
            raise InvalidConfiguration(f"message {message_id} is not from this consumer's topics")
        return part

    def _check_open(self) -> None:
        if self._closed:
            raise AlreadyClosed("consumer is closed")

    def __iter__(self):
        while True:
            yield self.receive()


def _take_all(queue: deque) -> list:
    """Pop everything in ``queue`` now (others may append meanwhile)."""
    taken = []
    with contextlib.suppress(IndexError):
        for _ in range(len(queue)):
            taken.append(queue.popleft())
    return taken


def _now_ms() -> int:
    return int(time.time() * 1000)
