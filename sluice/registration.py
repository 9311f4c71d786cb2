"""A producer's registration on the partitions of its topic (``producer.lua``).

Pulsar's broker knows its producers by their connections; Sluice has no broker between the
client and Redis, so a producer registers itself on every partition it may write to
(``sl:{P}:producers``, the producer id scored by its last heartbeat in Redis time).  The
registration is counted against ``maxProducersPerTopic`` (refused with ``ProducerBusy``),
renewed on every heartbeat of the client's background thread, and removed when the producer
closes.  A producer that dies without closing stops counting once it has been silent for
``consumerTimeoutMs`` (the worker setting that also releases silent consumers, 10 s by
default).  Every registration and renewal answers the partition's ``maxMessageSize``, which
the producer checks its sends against, and its durable acknowledgements (``sluice.durable``):
a change reaches live producers within a heartbeat (and a send that does not wait for the
replicas the partition asks for is refused by ``produce.lua``, which names them).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import TYPE_CHECKING

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoPermissionError, NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from sluice.durable import DEFAULT_TIMEOUT_MS as DEFAULT_ACK_TIMEOUT_MS
from sluice.durable import NONE, Durability
from sluice.protocol import keys
from sluice.protocol.abuse import DEFAULT_MAX_MESSAGE_SIZE
from sluice.protocol.names import TopicName
from sluice.protocol.scripts import PRODUCER
from sluice.refusals import refusal

if TYPE_CHECKING:
    from sluice.client import Client

log = logging.getLogger(__name__)

DEFAULT_EXPIRY_MS = 10_000  # when the workers have not published consumerTimeoutMs yet


class ProducerRegistration:
    """One producer's registration on every partition of its topic."""

    def __init__(self, client: Client, partitions: list[TopicName], producer_id: str) -> None:
        self._client = client
        self._partitions = partitions
        self._id = producer_id
        raw = client.redis.hget(keys.CLIENT_CONFIG, "consumerTimeoutMs")
        self.expiry_ms = int(raw) if raw else DEFAULT_EXPIRY_MS
        self._max_sizes = {p.full: DEFAULT_MAX_MESSAGE_SIZE for p in partitions}
        self._durability = {p.full: NONE for p in partitions}
        # A heartbeat that was running when the producer closed must not register it again
        # after its removal: renewals and the removal take turns, and none follows a close.
        self._turn = threading.Lock()
        self._unregistered = False

    def max_message_size(self, partition: TopicName) -> int:
        """The partition's maxMessageSize as it last answered, in bytes."""
        return self._max_sizes[partition.full]

    def durability(self, partition: TopicName) -> Durability:
        """The durable acknowledgements the partition asks for, as it last answered."""
        return self._durability[partition.full]

    def learn_durability(self, partition: TopicName, replicas: int, timeout_ms: int) -> None:
        """The partition's durable acknowledgements, as a refused send named them."""
        self._durability[partition.full] = (
            Durability(replicas, timeout_ms or DEFAULT_ACK_TIMEOUT_MS) if replicas > 0 else NONE
        )

    def _take(self, partition: TopicName, reply: list) -> None:
        size, replicas, timeout_ms = (int(value) for value in reply)
        self._max_sizes[partition.full] = size
        self.learn_durability(partition, replicas, timeout_ms)

    def register(self) -> None:
        """Register on every partition; ``ProducerBusy`` (and no registration left behind)
        when one of them has ``maxProducersPerTopic`` producers already."""
        script = self._client.scripts[PRODUCER.name]
        done: list[TopicName] = []
        try:
            for partition in self._partitions:
                script_keys, args = PRODUCER.call(partition, self._id, self.expiry_ms)
                try:
                    reply = script(keys=script_keys, args=args)
                except ResponseError as exc:
                    raise refusal(exc, partition.full, "produce") or exc from None
                self._take(partition, reply)
                done.append(partition)
        except BaseException:
            self._remove(done)
            raise

    def renew(self) -> None:
        """Heartbeat: renew every registration (in one round trip) and take the sizes and
        durable acknowledgements."""
        script = self._client.scripts[PRODUCER.name]
        pipe = self._client.redis.pipeline(transaction=False)
        for partition in self._partitions:
            script_keys, args = PRODUCER.call(partition, self._id, self.expiry_ms)
            # EVALSHA itself: a script object in a pipeline first asks SCRIPT EXISTS, a round
            # trip more every heartbeat; a NOSCRIPT reply is handled below.
            pipe.evalsha(script.sha, len(script_keys), *script_keys, *args)
        try:
            with self._turn:
                if self._unregistered:
                    return
                replies = pipe.execute(raise_on_error=False)
        except (RedisConnectionError, RedisTimeoutError):
            return  # the next heartbeat tries again; the registration lasts expiry_ms
        if any(isinstance(reply, NoScriptError) for reply in replies):
            self._client.reload_scripts()  # a failover's new master: the next heartbeat works
        for partition, reply in zip(self._partitions, replies, strict=True):
            if isinstance(reply, NoScriptError):
                continue  # loaded above: renewed at the next heartbeat, well within expiry
            if isinstance(reply, Exception):
                # Silent for longer than the expiry and the place taken meanwhile: this
                # producer does not count until a place is free again.
                log.warning("producer %s on %s: %s", self._id, partition.full, reply)
            else:
                self._take(partition, reply)

    def unregister(self) -> None:
        """Stop counting on every partition (best effort: otherwise it expires)."""
        # Also when the role lost its grant meanwhile (NOPERM): the registration expires.
        with self._turn:
            self._unregistered = True
            with contextlib.suppress(RedisConnectionError, RedisTimeoutError, NoPermissionError):
                self._remove(self._partitions)

    def _remove(self, partitions: list[TopicName]) -> None:
        if not partitions:
            return
        pipe = self._client.redis.pipeline(transaction=False)
        for partition in partitions:
            pipe.zrem(keys.producers(partition), self._id)
        pipe.execute()
