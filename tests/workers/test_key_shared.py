"""Key_Shared subscriptions against a real worker: keys go to one consumer each, in order.

Consumers receive on threads of their own and acknowledge what they receive; every reception
is logged with a monotonic time.  "In order across a join and a leave" is checked on what the
applications saw: for every key, the messages first received, by any consumer, in time order,
are that key's messages in the order they were sent (a redelivery of a message already seen,
after a consumer left, is allowed).
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

import sluice
from sluice.keyshared import key_slot
from tests.receiving import BackgroundReceiver
from tests.workers.conftest import ADMIN, rate, wait_until
from tests.workers.test_strict_bound import excess

TOPIC = "persistent://acme/orders/keyed"
PATH = f"{ADMIN}/persistent/acme/orders/keyed"


class Receiver(BackgroundReceiver):
    """A consumer receiving and acknowledging on a thread; logs (time, key, payload)."""

    def __init__(self, consumer: sluice.Consumer, pause: float = 0.0) -> None:
        super().__init__(consumer)
        self.pause = pause
        self.log: list[tuple[float, str, bytes]] = []
        self.start_receiving()

    def received(self, message: sluice.Message) -> None:
        self.log.append((time.monotonic(), message.partition_key(), message.data()))
        self.consumer.acknowledge(message)
        if self.pause:
            time.sleep(self.pause)

    def failed(self, exc: Exception) -> bool:
        """A consumer closed under the thread ends it; anything else is an error."""
        if isinstance(exc, sluice.AlreadyClosed):
            return False
        raise exc

    def stop(self, close: bool = True) -> None:
        self.stop_receiving()
        if close:
            self.consumer.close()

    def keys(self) -> set[str]:
        return {key for _, key, _ in self.log}


def subscribe(client, name: str | None = None, queue: int = 1000, **options) -> sluice.Consumer:
    return client.subscribe(
        TOPIC,
        "ks",
        consumer_type=sluice.ConsumerType.KeyShared,
        consumer_name=name,
        receiver_queue_size=queue,
        **options,
    )


def first_seen_in_order(receivers: list[Receiver], keys: int, per_key: int) -> None:
    """Every message arrived, and per key the first receptions follow the sending order."""
    log = sorted(entry for r in receivers for entry in r.log)
    seen: dict[str, list[int]] = {}
    for _, key, payload in log:
        seq = int(payload.split(b":")[1])
        order = seen.setdefault(key, [])
        if seq not in order:
            order.append(seq)
    assert len(seen) == keys
    for key, order in seen.items():
        assert order == list(range(per_key)), (key, order)


def send_keyed(client: sluice.Client, keys: int, per_key: int) -> None:
    """``per_key`` messages ``"<key>:<seq>"`` for each of ``keys`` keys, interleaved."""
    producer = client.create_producer(TOPIC)
    for seq in range(per_key):
        for k in range(keys):
            producer.send_async(f"{k}:{seq}".encode(), None, partition_key=f"key-{k}")
    producer.flush()


@pytest.mark.parametrize("count", [2, 3])
def test_consumers_get_disjoint_key_sets(http, namespace, client, count):
    assert http.put(PATH).status_code == 204
    receivers = [Receiver(subscribe(client, f"c{i}")) for i in range(count)]
    keys, per_key = 60, 5
    send_keyed(client, keys, per_key)
    wait_until(lambda: sum(len(r.log) for r in receivers) >= keys * per_key, timeout=20)
    for r in receivers:
        r.stop()
    sets = [r.keys() for r in receivers]
    assert all(sets), [len(s) for s in sets]  # each consumer owns some keys
    for i in range(count):
        for j in range(i + 1, count):
            assert not sets[i] & sets[j]
    assert set().union(*sets) == {f"key-{k}" for k in range(keys)}
    first_seen_in_order(receivers, keys, per_key)
    assert sum(len(r.log) for r in receivers) == keys * per_key  # nothing twice


def test_sticky_ranges_route_by_the_murmur3_slot_and_the_ordering_key(http, namespace, client):
    assert http.put(PATH).status_code == 204
    thirds = [(0, 21844), (21845, 43689), (43690, 65535)]
    receivers = [
        Receiver(
            subscribe(
                client,
                f"s{i}",
                key_shared_policy=sluice.ConsumerKeySharedPolicy(
                    sluice.KeySharedMode.Sticky, sticky_ranges=[r]
                ),
            )
        )
        for i, r in enumerate(thirds)
    ]
    # Overlapping ranges and another mode are refused.
    with pytest.raises(sluice.ConsumerBusy, match="Range conflict"):
        subscribe(
            client,
            "overlap",
            key_shared_policy=sluice.ConsumerKeySharedPolicy(
                sluice.KeySharedMode.Sticky, sticky_ranges=[(21000, 22000)]
            ),
        )
    with pytest.raises(sluice.SubscriptionBusy):
        subscribe(client, "auto")
    producer = client.create_producer(TOPIC)
    for k in range(90):
        producer.send_async(f"{k}:0".encode(), None, partition_key=f"key-{k}")
    # The ordering key wins over the partition key.
    for k in range(30):
        producer.send_async(
            f"o{k}:0".encode(), None, partition_key="same-partition-key", ordering_key=f"ok-{k}"
        )
    producer.flush()
    wait_until(lambda: sum(len(r.log) for r in receivers) >= 120, timeout=20)
    for r in receivers:
        r.stop()
    for (start, end), r in zip(thirds, receivers, strict=True):
        assert r.log
        for _, key, payload in r.log:
            if payload.startswith(b"o"):
                key = f"ok-{int(payload[1:].split(b':')[0])}"
            assert start <= key_slot(key) <= end, (key, key_slot(key), start, end)


def test_every_key_stays_in_order_across_a_join_and_a_leave(http, namespace, client):
    assert http.put(PATH).status_code == 204
    # A backlog and slow consumers with small receiver queues: messages are out with a
    # consumer (queued, not yet received) when another joins and when it leaves; the joiner
    # is fast, so a key that moves to it would overtake its earlier messages but for the rule.
    a = Receiver(subscribe(client, "a", queue=10), pause=0.02)
    b = Receiver(subscribe(client, "b", queue=10), pause=0.02)
    keys, per_key = 20, 30
    send_keyed(client, keys, per_key)
    time.sleep(0.5)
    c = Receiver(subscribe(client, "c", queue=10))  # joins
    time.sleep(1.0)
    a.stop()  # leaves, with messages still out with it
    receivers = [a, b, c]

    def firsts() -> int:
        return len({payload for r in receivers for _, _, payload in r.log})

    wait_until(lambda: firsts() >= keys * per_key, timeout=30)
    b.stop()
    c.stop()
    assert c.log and a.log  # the joiner took keys, the leaver had some
    first_seen_in_order(receivers, keys, per_key)


def test_key_shared_dispatch_holds_the_rate_limit(http, namespace, client):
    """20 msg/s on the subscription, two consumers: the strict bound on all arrivals."""
    assert http.put(PATH).status_code == 204
    limit = 20
    answer = http.post(f"{ADMIN}/namespaces/acme/orders/subscriptionDispatchRate", json=rate(limit))
    assert answer.status_code == 204
    origin = time.monotonic()
    receivers = [Receiver(subscribe(client, f"r{i}")) for i in range(2)]
    producer = client.create_producer(TOPIC)
    for i in range(limit * 3):
        producer.send_async(f"{i}:0".encode(), None, partition_key=f"key-{i % 12}")
    producer.flush()
    wait_until(lambda: sum(len(r.log) for r in receivers) >= limit * 3, timeout=15)
    for r in receivers:
        r.stop()
    times = [at - origin for r in receivers for at, _, _ in r.log]
    assert len(times) == limit * 3
    assert excess(times, limit) <= 0, sorted(times)
    assert all(r.log for r in receivers)


def test_messages_without_a_key_are_spread_and_delays_apply(http, namespace, client):
    assert http.put(PATH).status_code == 204
    assert (
        http.post(f"{ADMIN}/brokers/configuration/isDelayedDeliveryDeliverAtTimeStrict/true")
    ).status_code == 204
    receivers = [Receiver(subscribe(client, f"n{i}", queue=10), pause=0.005) for i in range(2)]
    producer = client.create_producer(TOPIC)
    sent = time.monotonic()
    producer.send(b"late:0", partition_key="late", deliver_after=timedelta(milliseconds=1500))
    for i in range(60):
        producer.send_async(f"{i}:0".encode(), None)
    producer.flush()
    wait_until(lambda: sum(len(r.log) for r in receivers) >= 61, timeout=15)
    for r in receivers:
        r.stop()
    keyless = [len([e for e in r.log if e[2] != b"late:0"]) for r in receivers]
    assert all(n > 0 for n in keyless) and sum(keyless) == 60
    [late_at] = [at for r in receivers for at, _, p in r.log if p == b"late:0"]
    assert late_at - sent >= 1.5  # held until its time (strict), keyed or not


def test_policy_arguments_are_checked():
    with pytest.raises(sluice.InvalidConfiguration):
        sluice.ConsumerKeySharedPolicy(sluice.KeySharedMode.Sticky)
    with pytest.raises(sluice.InvalidConfiguration):
        sluice.ConsumerKeySharedPolicy(sluice.KeySharedMode.Sticky, sticky_ranges=[(5, 70000)])
    with pytest.raises(sluice.InvalidConfiguration):
        sluice.ConsumerKeySharedPolicy(
            sluice.KeySharedMode.Sticky, sticky_ranges=[(0, 10), (10, 20)]
        )
    policy = sluice.ConsumerKeySharedPolicy(
        sluice.KeySharedMode.Sticky, sticky_ranges=[(100, 200), (0, 10)]
    )
    assert policy.sticky_ranges() == [(0, 10), (100, 200)]
    assert policy.key_shared_mode() is sluice.KeySharedMode.Sticky
    assert not policy.allow_out_of_order_delivery()


def test_messages_waiting_for_their_consumer_do_not_make_the_worker_spin(
    http, namespace, worker, client
):
    """A consumer that does not receive: its keys' messages are held, due at once; the
    dispatcher parks until permits or acks come, instead of calling the script in a loop."""
    assert http.put(PATH).status_code == 204
    stuck = subscribe(client, "stuck", queue=1)  # never receives: one permit, then none
    live = Receiver(subscribe(client, "live"))
    producer = client.create_producer(TOPIC)
    for i in range(200):
        producer.send_async(f"{i % 20}:{i // 20}".encode(), None, partition_key=f"key-{i % 20}")
    producer.flush()
    time.sleep(1.5)  # the live consumer gets its keys' messages; the stuck one's wait
    assert 0 < len(live.log) < 200

    def calls() -> int:
        runner = worker.call(lambda w: w.runners[TOPIC])
        return runner.dispatchers["ks"].dispatch_calls

    before = calls()
    time.sleep(2)
    assert calls() - before < 20  # parked (a spinning loop makes thousands of calls)
    # The stuck consumer's keys were held, not lost: closing it hands them to the other.
    stuck.close()
    wait_until(lambda: len(live.log) == 200, timeout=15)
    live.stop()
    first_seen_in_order([live], 20, 10)
