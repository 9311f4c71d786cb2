"""Limits are promises kept from the first message: counted by the consumer, strictly.

Everything goes through the public surface only: policies over REST, messages through the
client.  The bound: by T seconds after a subscription exists, at most
LIMIT x (floor(T) + 1) entries may have arrived (per partition).  T is taken from just
before ``subscribe`` is called, which is no later than the subscription's creation, and
arrival times are taken when ``receive`` returns, no earlier than the dispatch: both only
loosen the measurement, never tighten it, so the assertion has no tolerance at all.

Several runs go at once (each its own namespace), so the races between a policy write and
the traffic right after it are exercised many times per test.
"""

from __future__ import annotations

import math
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

import sluice
from tests.workers.conftest import ADMIN, drain, rate

RUNS = 6
BROKER = f"{ADMIN}/brokers/configuration"


def excess(times: list[float], limit: int, periods_extra: int = 1) -> int:
    """How far the arrivals (seconds after the origin) exceed the strict bound."""
    worst = -limit
    for count, at in enumerate(sorted(times), start=1):
        worst = max(worst, count - limit * (math.floor(at) + periods_extra))
    return worst


def receive_all(consumer: sluice.Consumer, origin: float, expected: int, seconds: float):
    """Arrival times (seconds after ``origin``) until ``expected`` arrived or ``seconds``."""
    return [at for at, _ in drain(consumer, expected, seconds, origin)]


def new_topic(http, partitions: int = 0, prefix: str = "r") -> tuple[str, str]:
    """A new namespace of tenant acme with a topic t (partitioned when ``partitions``):
    the namespace's name and the topic's admin path."""
    ns = f"acme/{prefix}{uuid.uuid4().hex[:8]}"
    assert http.put(f"{ADMIN}/namespaces/{ns}").status_code == 204
    path = f"{ADMIN}/persistent/{ns}/t"
    if partitions:
        assert http.put(f"{path}/partitions", json=partitions).status_code == 204
    else:
        assert http.put(path).status_code == 204
    return ns, path


def one_run(http, client, set_limit, limit: int, count: int, partitions: int = 0):
    """Create a topic, set a limit, then at once subscribe and produce; arrival times."""
    ns, path = new_topic(http, partitions)
    answer = set_limit(http, ns, path, limit)
    assert answer.status_code == 204, answer.text
    assert "x-sluice-enforcement" not in answer.headers
    topic = f"persistent://{ns}/t"
    origin = time.monotonic()
    consumer = client.subscribe(topic, "s", consumer_type=sluice.ConsumerType.Shared)
    producer = client.create_producer(topic, block_if_queue_full=True)  # count may pass 1000
    for _ in range(count):
        producer.send_async(b"m" * 16, None)
    producer.flush()
    per_second = limit * max(partitions, 1)
    times = receive_all(consumer, origin, count, count / per_second + 4)
    consumer.close()
    producer.close()
    return times


LIMIT_SETTERS = {
    "namespace dispatchRate": lambda http, ns, path, n: http.post(
        f"{ADMIN}/namespaces/{ns}/dispatchRate", json=rate(n)
    ),
    "topic dispatchRate": lambda http, ns, path, n: http.post(f"{path}/dispatchRate", json=rate(n)),
    "namespace subscriptionDispatchRate": lambda http, ns, path, n: http.post(
        f"{ADMIN}/namespaces/{ns}/subscriptionDispatchRate", json=rate(n)
    ),
    "topic subscriptionDispatchRate": lambda http, ns, path, n: http.post(
        f"{path}/subscriptionDispatchRate", json=rate(n)
    ),
    "subscription's own dispatchRate": lambda http, ns, path, n: http.post(
        f"{path}/s/dispatchRate", json=rate(n)
    ),
}


@pytest.mark.parametrize("level", list(LIMIT_SETTERS))
def test_a_limit_set_just_before_traffic_holds_from_the_first_message(
    http, namespace, worker, client, level
):
    limit = 25
    with ThreadPoolExecutor(RUNS) as pool:
        runs = list(
            pool.map(
                lambda _: one_run(http, client, LIMIT_SETTERS[level], limit, limit * 3),
                range(RUNS),
            )
        )
    for times in runs:
        assert len(times) == limit * 3  # everything arrives, over three periods
        assert excess(times, limit) <= 0, sorted(times)[: limit + 5]


@pytest.mark.parametrize("limit", [1000, 5000])
def test_the_first_second_is_exact_at_higher_rates(http, namespace, worker, client, limit):
    with ThreadPoolExecutor(2) as pool:
        runs = list(
            pool.map(
                lambda _: one_run(
                    http, client, LIMIT_SETTERS["namespace dispatchRate"], limit, limit * 3
                ),
                range(2),
            )
        )
    for times in runs:
        assert len(times) == limit * 3
        assert excess(times, limit) <= 0


def test_a_partitioned_topic_is_limited_per_partition_from_the_first_message(
    http, namespace, worker, client
):
    limit, partitions = 20, 3
    with ThreadPoolExecutor(3) as pool:
        runs = list(
            pool.map(
                lambda _: one_run(
                    http,
                    client,
                    LIMIT_SETTERS["namespace dispatchRate"],
                    limit,
                    limit * partitions * 3,
                    partitions,
                ),
                range(3),
            )
        )
    for times in runs:
        assert len(times) == limit * partitions * 3
        assert excess(times, limit * partitions) <= 0


def test_a_broker_limit_set_just_before_traffic_holds(http, namespace, worker, client):
    def broker_per_topic(http, ns, path, n):
        return http.post(f"{BROKER}/dispatchThrottlingRatePerTopicInMsg/{n}")

    times = one_run(http, client, broker_per_topic, 30, 90)
    assert len(times) == 90
    assert excess(times, 30) <= 0


def test_a_lowered_limit_holds_from_the_answer_on(http, namespace, worker, client):
    """After the 2xx no entry goes out under the old limit: counted from the answer, at most
    one period of the new limit straddles it, then one per period."""
    path = f"{ADMIN}/persistent/acme/orders/lowered"
    assert http.put(path).status_code == 204
    assert http.post(f"{path}/dispatchRate", json=rate(500)).status_code == 204
    topic = "persistent://acme/orders/lowered"
    consumer = client.subscribe(
        topic, "s", consumer_type=sluice.ConsumerType.Shared, receiver_queue_size=50
    )
    producer = client.create_producer(topic, block_if_queue_full=True)  # 3000 > its queue
    for _ in range(3000):
        producer.send_async(b"m", None)
    producer.flush()
    assert len(receive_all(consumer, time.monotonic(), 700, 4)) == 700
    assert http.post(f"{path}/dispatchRate", json=rate(20)).status_code == 204
    answered = time.monotonic()
    times = receive_all(consumer, answered, 10_000, 3.5)
    # Entries dispatched before the answer may still sit in the receiver queue (at most 50):
    # they are received at once; then the new limit.
    late = [t for t in times if t >= 0.3]
    assert excess([t - 0.3 for t in late], 20, periods_extra=2) <= 0
    assert len(late) >= 20 * 2  # and the new limit is used, not stalled
