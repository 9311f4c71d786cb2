"""The wake-up channel is open to anyone who can publish on Redis: garbage is dropped."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
import redis

import sluice
from sluice.consumer import InitialPosition
from sluice.protocol import keys
from tests.workers.conftest import ADMIN, wait_until

TOPIC = "persistent://acme/orders/woken"


def test_unreadable_wake_up_messages_do_not_stop_dispatch(http, namespace, client, redis_server):
    assert http.put(f"{ADMIN}/persistent/acme/orders/woken").status_code == 204
    consumer = client.subscribe(TOPIC, "sub")
    producer = client.create_producer(TOPIC)
    plain = redis.Redis.from_url(redis_server.url)
    try:
        for garbage in (b"\xff\xfe\x00", b"t\tnot a topic", b"s", b"p\t\t\t", b""):
            plain.publish(keys.WAKE_CHANNEL, garbage)
    finally:
        plain.close()
    time.sleep(0.2)
    # An idle subscription is dispatched on the next produce's wake-up, well before the
    # dispatcher's own fallback poll: the wake-up listener is still alive.
    for i in range(3):
        producer.send(f"m{i}".encode())
        started = time.monotonic()
        message = consumer.receive(timeout_millis=5_000)
        assert message.data() == f"m{i}".encode()
        assert time.monotonic() - started < 1.0
        consumer.acknowledge(message)


def test_a_subscription_made_while_its_partition_starts_gets_its_messages(
    http, namespace, worker, client
):
    """A consumer that subscribes at the earliest position after its partition's runner read
    the subscriptions, but before the worker routes wake-ups to it (its wake-up is dropped),
    still gets what was produced, as promptly as any other."""
    topic = "persistent://acme/orders/starting"
    subscribed = threading.Event()
    consumers: list[sluice.Consumer] = []
    adopt = worker.worker.stats.adopt

    async def adopt_then_subscribe(runner):
        await adopt(runner)
        if runner.partition.full == topic and not consumers:
            consumers.append(
                await asyncio.to_thread(
                    client.subscribe, topic, "early", initial_position=InitialPosition.Earliest
                )
            )
            await asyncio.sleep(0.3)  # its wake-up arrives before the runner is routed to
            subscribed.set()

    worker.worker.stats.adopt = adopt_then_subscribe
    producer = client.create_producer(topic)  # created on first use: the worker starts it
    for i in range(3):
        producer.send(f"m{i}".encode())
    assert subscribed.wait(20)
    started = time.monotonic()
    got = [consumers[0].receive(timeout_millis=5_000).data() for _ in range(3)]
    assert got == [b"m0", b"m1", b"m2"]
    assert time.monotonic() - started < 3.0


def test_a_subscription_whose_wake_up_was_lost_is_found_when_the_channel_is_back(
    http, namespace, worker, client
):
    """Wake-ups published while the channel was down are lost: when the worker subscribes
    again it reads every partition's subscriptions, so a new one gets a dispatcher."""
    assert http.put(f"{ADMIN}/persistent/acme/orders/woken").status_code == 204
    producer = client.create_producer(TOPIC)
    for i in range(3):
        producer.send(f"m{i}".encode())
    # The produce woke the partition (it slept: created without entries or subscriptions).
    runner = wait_until(lambda: worker.call(lambda w: w.runners.get(TOPIC)))
    wake_subscription = runner.wake_subscription

    async def lost(subscription: str, consumers_changed: bool = True) -> None:
        if subscription != "late":
            await wake_subscription(subscription, consumers_changed)

    runner.wake_subscription = lost  # the wake-ups of the new subscription are lost
    consumer = client.subscribe(TOPIC, "late", initial_position=InitialPosition.Earliest)
    with pytest.raises(sluice.Timeout):
        consumer.receive(timeout_millis=1_000)
    del runner.wake_subscription
    worker.call(lambda w: w.wake_everything())  # what a (re)subscription to the channel does
    got = [consumer.receive(timeout_millis=5_000).data() for _ in range(3)]
    assert got == [b"m0", b"m1", b"m2"]


async def test_a_flapping_wake_up_channel_backs_off(redis_server):
    """A subscription dropped as soon as it is made (here: its connection killed every 50 ms)
    is made again with a growing pause, not at once: each one wakes every dispatcher."""
    from redis.asyncio import Redis

    from workers.wakeups import listen_for_wakeups

    subscriptions: list[float] = []
    client = Redis.from_url(redis_server.url)
    killer = redis.Redis.from_url(redis_server.url)

    async def ignore(_message: str) -> None:
        return None

    listener = asyncio.create_task(
        listen_for_wakeups(client, ignore, lambda: subscriptions.append(time.monotonic()))
    )
    try:
        end = time.monotonic() + 3.0
        while time.monotonic() < end:
            await asyncio.to_thread(killer.client_kill_filter, _type="pubsub")
            await asyncio.sleep(0.05)
    finally:
        listener.cancel()
        with pytest.raises(asyncio.CancelledError):
            await listener
        await client.aclose()
        killer.close()
    # Pauses of 0.1, 0.2, 0.4, 0.8 and 1.6 s fit in 3 s: at most 6 subscriptions (one per
    # kill, about 60 of them, without the backoff).
    assert 2 <= len(subscriptions) <= 7, subscriptions
