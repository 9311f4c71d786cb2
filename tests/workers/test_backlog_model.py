"""``msgBacklog`` against a model, over random histories driven through the real system.

A subscription's backlog is the entries it has not acknowledged.  The model keeps, for every
subscription, the set of entries it has not acknowledged: those produced after it was created
(or every entry the stream still holds, for one created at the earliest position), less those
it acknowledged one by one or cumulatively, less those the message TTL passed.  Receiving
moves entries to consumers without changing it; a negative acknowledgement or a closed
consumer hands them back; trimming deletes only entries every subscription acknowledged; a
worker restart changes nothing.

Each step is driven the way it happens for real: messages through the client, subscriptions
over REST or by consumers (Shared, Exclusive, Failover), trimming by the owning worker's own
trim, TTL expiry by the worker's housekeeping under a ``messageTTL`` policy set over REST, a
restart by stopping the owning worker and starting a new one.  After every step the stats
answered over REST must equal the model for every subscription at once (no waiting: backlog
may not lag), but for the TTL step, which waits for the worker to act.  At the end a consumer
on each subscription receives exactly the entries the model (and so ``msgBacklog``) counted.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest
import redis
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import sluice
from models.settings import Settings
from sluice.protocol import keys
from sluice.protocol.names import TopicName
from tests.workers.conftest import ADMIN, WorkerThread, wait_until

TYPES = {
    "a": sluice.ConsumerType.Shared,
    "b": sluice.ConsumerType.Exclusive,
    "c": sluice.ConsumerType.Failover,
}
SUBSCRIPTIONS = tuple(TYPES)
TTL_SECONDS = 1
RECEIVER_QUEUE = 4  # small, so that a consumer leaves entries nobody was given yet
_topics = itertools.count()
_workers = itertools.count(1)

step = st.one_of(
    st.tuples(st.just("produce"), st.integers(1, 40)),
    st.tuples(st.just("produce"), st.integers(1, 40)),
    st.tuples(st.just("subscribe_rest"), st.sampled_from(SUBSCRIPTIONS)),
    st.tuples(st.just("subscribe_earliest"), st.sampled_from(SUBSCRIPTIONS)),
    st.tuples(st.just("subscribe_latest"), st.sampled_from(SUBSCRIPTIONS)),
    st.tuples(st.just("subscribe_earliest"), st.sampled_from(SUBSCRIPTIONS)),
    st.tuples(st.just("receive_hold"), st.integers(1, 15)),
    st.tuples(st.just("receive_ack"), st.integers(1, 15)),
    st.tuples(st.just("ack_held"), st.just(0)),
    st.tuples(st.just("ack_cumulative"), st.just(0)),
    st.tuples(st.just("nack_held"), st.just(0)),
    st.tuples(st.just("close"), st.just(0)),
    st.tuples(st.just("trim"), st.just(0)),
    st.tuples(st.just("ttl"), st.just(0)),
    st.tuples(st.just("restart"), st.just(0)),
)


@dataclass
class Model:
    """What each subscription's backlog must be: the entries (by produce order) it has not
    acknowledged."""

    produced: int = 0
    kept: set[int] = field(default_factory=set)  # entries the stream still holds
    unacked: dict[str, set[int]] = field(default_factory=dict)

    def produce(self, count: int) -> None:
        new = range(self.produced, self.produced + count)
        self.kept.update(new)
        for entries in self.unacked.values():
            entries.update(new)
        self.produced += count

    def create(self, name: str, earliest: bool) -> None:
        if name not in self.unacked:
            self.unacked[name] = set(self.kept) if earliest else set()

    def backlog(self) -> dict[str, int]:
        return {name: len(entries) for name, entries in self.unacked.items()}


class Workers:
    """The topic's owning worker, which a step may stop and replace by a new one."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.current = self._start()

    def _start(self) -> WorkerThread:
        update = {"worker_id": f"model-worker-{next(_workers)}"}
        return WorkerThread(self.settings.model_copy(update=update)).start()

    def restart(self) -> None:
        self.current.stop()
        self.current = self._start()

    def stop(self) -> None:
        self.current.stop()


@pytest.fixture
def workers(http: httpx.Client, worker_settings: Settings) -> Iterator[Workers]:
    held = Workers(worker_settings)
    yield held
    held.stop()


@pytest.fixture
def small_nodes(redis_server) -> Iterator[redis.Redis]:
    """Streams in nodes of 4 entries, so the worker's approximate trimming (whole nodes only)
    deletes entries in histories this short; the session's setting comes back afterwards."""
    connection = redis.Redis.from_url(redis_server.url)
    before = connection.config_get("stream-node-max-entries")["stream-node-max-entries"]
    connection.config_set("stream-node-max-entries", 4)
    yield connection
    connection.config_set("stream-node-max-entries", before)
    connection.close()


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(history=st.lists(step, min_size=3, max_size=10))
# Created at the latest entry of a topic that has some: Redis cannot tell such a group's lag.
@example(history=[("produce", 10), ("subscribe_rest", "a"), ("produce", 5)])
@example(
    history=[
        ("produce", 4),
        ("subscribe_earliest", "a"),
        ("receive_hold", 3),
        ("produce", 6),
        ("nack_held", 0),
        ("receive_ack", 5),
        ("subscribe_rest", "c"),
        ("produce", 2),
    ]
)
# Trimming, TTL and a restart over several subscriptions, one of them acknowledging
# cumulatively.
@example(
    history=[
        ("subscribe_rest", "a"),
        ("produce", 30),
        ("subscribe_earliest", "b"),
        ("receive_hold", 12),
        ("ack_cumulative", 0),
        ("subscribe_earliest", "a"),
        ("receive_ack", 15),
        ("trim", 0),
        ("subscribe_earliest", "c"),
        ("receive_hold", 4),
        ("ttl", 0),
        ("restart", 0),
        ("produce", 5),
        ("subscribe_earliest", "b"),
        ("receive_hold", 15),
        ("ack_cumulative", 0),
    ]
)
# A subscription with nothing pending whose cursor the TTL moved: trimming must keep what
# follows its cursor.
@example(
    history=[
        ("subscribe_rest", "a"),
        ("produce", 20),
        ("ttl", 0),
        ("produce", 10),
        ("trim", 0),
        ("subscribe_earliest", "b"),
        ("receive_ack", 15),
    ]
)
# A subscription at the earliest entry, trimmed right after it was created: it keeps
# everything, though the worker may not run a dispatcher for it yet.
@example(
    history=[
        ("subscribe_earliest", "a"),
        ("produce", 20),
        ("receive_ack", 15),
        ("subscribe_earliest", "c"),
        ("trim", 0),
        ("receive_hold", 15),
    ]
)
def test_backlog_matches_the_model_after_every_step(
    http, namespace, workers, redis_server, small_nodes, history
):
    local = f"model{next(_topics)}"
    topic = f"persistent://{namespace}/{local}"
    name = TopicName.from_full(topic)
    path = f"{ADMIN}/persistent/{namespace}/{local}"
    stream = keys.log(name)
    assert http.put(path).status_code == 204
    client = sluice.Client(redis_server.url)
    producer = client.create_producer(topic)
    model = Model()
    ids: dict[int, bytes] = {}  # entry (produce order) -> its stream id
    consumer: sluice.Consumer | None = None
    held: list[sluice.Message] = []
    active = ""  # the subscription the consumer is on

    def stats() -> dict[str, int]:
        subs = http.get(f"{path}/stats").json()["subscriptions"]
        return {sub: doc["msgBacklog"] for sub, doc in subs.items()}

    def entry(message: sluice.Message) -> int:
        number = int(message.data())
        assert number in model.unacked[active], f"{active} got {number}, acknowledged"
        return number

    def close() -> None:
        nonlocal consumer
        if consumer is not None:
            consumer.close()  # unacknowledged entries go back to the subscription
            held.clear()
            consumer = None

    def subscribe(sub: str, initial: sluice.InitialPosition) -> None:
        nonlocal consumer, active
        close()
        consumer = client.subscribe(
            topic,
            sub,
            consumer_type=TYPES[sub],
            initial_position=initial,
            negative_ack_redelivery_delay_ms=100,
            receiver_queue_size=RECEIVER_QUEUE,
        )
        active = sub
        model.create(sub, initial is sluice.InitialPosition.Earliest)

    def flush() -> None:
        # An acknowledgement is complete once the consumer sent it (grouped every 100 ms).
        assert consumer is not None
        consumer._flush_acks()

    def runner_call(fn):
        wait_until(lambda: workers.current.call(lambda w: name.full in w.runners), timeout=10)
        return workers.current.call(lambda w: fn(w.runners[name.full]))

    def flow_ttl(expected: int | None) -> None:
        wait_until(
            lambda: (
                workers.current.call(lambda w: w.policy.flow(name).message_ttl.value)
                == (expected if expected is not None else 0)
            ),
            timeout=10,
        )

    try:
        for kind, arg in history:
            if kind == "produce":
                for i in range(arg):
                    sent = producer.send(f"{model.produced + i}".encode())
                    ids[model.produced + i] = sent.stream_id.encode()
                model.produce(arg)
            elif kind == "subscribe_rest" and arg not in model.unacked:
                assert http.put(f"{path}/subscription/{arg}").status_code == 204
                model.create(arg, earliest=False)
            elif kind == "subscribe_earliest":
                subscribe(arg, sluice.InitialPosition.Earliest)
            elif kind == "subscribe_latest":
                subscribe(arg, sluice.InitialPosition.Latest)
            elif kind in ("receive_hold", "receive_ack") and consumer is not None:
                for _ in range(arg):
                    try:
                        message = consumer.receive(timeout_millis=300)
                    except sluice.Timeout:
                        break
                    number = entry(message)
                    if kind == "receive_ack":
                        consumer.acknowledge(message)
                        model.unacked[active].discard(number)
                    else:
                        held.append(message)
                flush()
            elif kind == "ack_held" and consumer is not None and held:
                for message in held:
                    consumer.acknowledge(message)
                    model.unacked[active].discard(int(message.data()))
                held.clear()
                flush()
            elif kind == "ack_cumulative" and consumer is not None and held:
                if TYPES[active] is sluice.ConsumerType.Shared:
                    continue  # Shared subscriptions acknowledge one by one (as Pulsar's do)
                last = max(held, key=lambda m: int(m.data()))
                consumer.acknowledge_cumulative(last)
                # Pulsar's meaning: every entry up to and including it is acknowledged.
                upto = int(last.data())
                model.unacked[active] = {n for n in model.unacked[active] if n > upto}
                held.clear()
            elif kind == "nack_held" and consumer is not None and held:
                for message in held:
                    consumer.negative_acknowledge(message)
                held.clear()
            elif kind == "close":
                close()
            elif kind == "trim" and model.produced:
                # The worker's own trim, as its housekeeping runs it once the retention grace
                # period has passed for every entry.
                later = time.time() + workers.settings.retention_grace_seconds + 1
                runner_call(lambda r, later=later: r.trim(int(later * 1000)))
                left = {raw for raw, _fields in small_nodes.xrange(stream)}
                trimmed = {n for n in model.kept if ids[n] not in left}
                for sub, entries in model.unacked.items():
                    assert not trimmed & entries, f"trimmed entries {sub} did not acknowledge"
                model.kept -= trimmed
            elif kind == "ttl" and model.produced:
                # Entries no consumer was given expire: close the consumer (what it held
                # stays pending), let every entry grow older than the TTL, set the policy.
                close()
                time.sleep(TTL_SECONDS + 0.1)
                for sub in model.unacked:
                    pending = small_nodes.xpending_range(stream, sub, "-", "+", 100_000)
                    given_out = {p["message_id"] for p in pending}
                    model.unacked[sub] = {n for n in model.unacked[sub] if ids[n] in given_out}
                params = {"messageTTL": TTL_SECONDS}
                assert http.post(f"{path}/messageTTL", params=params).status_code == 204
                expected = model.backlog()
                wait_until(lambda expected=expected: stats() == expected, timeout=10)
                assert http.delete(f"{path}/messageTTL").status_code == 204
                flow_ttl(None)
            elif kind == "restart":
                workers.restart()
            assert stats() == model.backlog(), f"after {kind} {arg}"
        # What consumers then receive is what the stats said: every subscription's
        # unacknowledged entries, each at least once, and nothing else.
        close()
        for sub, expected in model.unacked.items():
            subscribe(sub, sluice.InitialPosition.Latest)
            assert consumer is not None
            got: set[int] = set()
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    # Once all came, a short wait for any that should not.
                    message = consumer.receive(timeout_millis=200 if got >= expected else 1000)
                except sluice.Timeout:
                    if got >= expected:
                        break
                    continue
                got.add(int(message.data()))
                consumer.acknowledge(message)
            assert got == expected, f"{sub}: received {len(got)}, msgBacklog {len(expected)}"
            flush()
            close()
            assert stats()[sub] == 0
    finally:
        close()
        producer.close()
        client.close()
