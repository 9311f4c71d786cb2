"""The subscribe rate through the real client against a real worker.

``subscribe.lua`` counts the subscribe requests of each consumer name from each client host
(the client's address as Redis sees it, as Pulsar counts per client address) on each
partition in a period that opens with the first request; the (N+1)th within the period is refused
with Pulsar's ``NotAllowed`` text as ``sluice.SubscribeRateLimited`` (a ``NotAllowedError``),
and the name may subscribe again once the period is over.  No test waits after a policy
write: a write answered 2xx is in force.
"""

from __future__ import annotations

import time

import pytest
import redis

import sluice
from sluice.protocol import keys
from sluice.protocol.names import TopicName
from sluice.protocol.scripts import SUBSCRIBE
from tests.workers.conftest import ADMIN

TOPIC = "persistent://acme/orders/joined"
PATH = f"{ADMIN}/persistent/acme/orders/joined"
NS = f"{ADMIN}/namespaces/acme/orders"
NAME = TopicName.from_full(TOPIC)
SHARED = sluice.ConsumerType.Shared
PULSAR_TEXT = "Subscribe limited by subscribe rate limit per consumer."


def subscribe_rate(rate: int, period: int) -> dict:
    return {"subscribeThrottlingRatePerConsumer": rate, "ratePeriodInSecond": period}


@pytest.fixture
def topic(http, namespace):
    """The non-partitioned topic ``joined``."""
    assert http.put(PATH).status_code == 204
    return http


def join(client: sluice.Client, name: str, topic: str = TOPIC) -> None:
    """One subscribe request of consumer ``name`` (the consumer leaves at once)."""
    client.subscribe(topic, "sub", consumer_type=SHARED, consumer_name=name).close()


def connected(redis_server, partition: TopicName = NAME) -> int:
    with redis.Redis.from_url(redis_server.url) as r:
        return int(r.zcard(keys.sub_key(partition, "sub", "alive")))


def test_the_next_subscribe_in_a_period_is_refused_until_the_period_ends(
    topic, worker, client, redis_server
):
    assert topic.post(f"{PATH}/subscribeRate", json=subscribe_rate(2, 2)).status_code == 204
    first = time.monotonic()
    join(client, "c1")
    join(client, "c1")
    with pytest.raises(sluice.SubscribeRateLimited) as refused:
        client.subscribe(TOPIC, "sub", consumer_type=SHARED, consumer_name="c1")
    refused_at = time.monotonic()
    error = refused.value
    assert isinstance(error, sluice.NotAllowedError)  # what pulsar-client raises
    assert str(error).startswith(
        f"{PULSAR_TEXT} Consumer 'c1' from 127.0.0.1 may subscribe 2 times per 2 s to {TOPIC}; "
        "try again in "
    )
    assert 0 < error.retry_after_seconds <= 2
    assert connected(redis_server) == 0  # the refused consumer left nothing behind
    # Another consumer name has its own count.
    join(client, "c2")
    # The period opened with c1's first request: refused until it ends, allowed after.
    while time.monotonic() - first < 1.8:
        with pytest.raises(sluice.SubscribeRateLimited):
            join(client, "c1")
        time.sleep(0.2)
    time.sleep(max(refused_at + error.retry_after_seconds - time.monotonic(), 0) + 0.2)
    consumer = client.subscribe(TOPIC, "sub", consumer_type=SHARED, consumer_name="c1")
    assert connected(redis_server) == 1
    consumer.close()


def test_a_changed_rate_is_in_force_when_the_write_is_answered(topic, worker, client):
    assert topic.post(f"{NS}/subscribeRate", json=subscribe_rate(1, 30)).status_code == 204
    join(client, "c1")
    with pytest.raises(sluice.SubscribeRateLimited):
        join(client, "c1")
    # Raised: the count so far (1) is under the new limit at once.
    assert topic.post(f"{PATH}/subscribeRate", json=subscribe_rate(3, 30)).status_code == 204
    join(client, "c1")
    join(client, "c1")
    with pytest.raises(sluice.SubscribeRateLimited):
        join(client, "c1")
    # Removed at both levels: the broker's default (no limit) applies.
    assert topic.delete(f"{PATH}/subscribeRate").status_code == 204
    assert topic.delete(f"{NS}/subscribeRate").status_code == 204
    for _ in range(5):
        join(client, "c1")


def test_the_broker_default_applies_to_each_partition(http, namespace, worker, client):
    wide = "persistent://acme/orders/wide"
    assert http.put(f"{ADMIN}/persistent/acme/orders/wide/partitions", json=2).status_code == 204
    config = f"{ADMIN}/brokers/configuration"
    assert http.post(f"{config}/subscribeThrottlingRatePerConsumer/2").status_code == 204
    # One subscribe of a partitioned topic is one request on each partition.
    join(client, "c1", wide)
    join(client, "c1", wide)
    with pytest.raises(sluice.SubscribeRateLimited, match=f"to {wide}-partition-0;"):
        join(client, "c1", wide)
    join(client, "c2", wide)


def test_other_refusals_count_as_requests(topic, worker, client):
    """As in Pulsar, the rate's permit is taken before the other checks: a consumer retrying
    against a full subscription is throttled too."""
    assert topic.post(f"{PATH}/subscribeRate", json=subscribe_rate(2, 30)).status_code == 204
    assert topic.post(f"{PATH}/maxConsumersPerSubscription", json=1).status_code == 204
    holder = client.subscribe(TOPIC, "sub", consumer_type=SHARED, consumer_name="holder")
    with pytest.raises(sluice.ConsumerBusy):
        join(client, "c1")
    with pytest.raises(sluice.ConsumerBusy):
        join(client, "c1")
    with pytest.raises(sluice.SubscribeRateLimited):
        join(client, "c1")
    holder.close()


def test_the_client_host_is_its_address_as_redis_sees_it(topic, worker, client, redis_server):
    assert client.host == "127.0.0.1"
    assert topic.post(f"{PATH}/subscribeRate", json=subscribe_rate(2, 30)).status_code == 204
    join(client, "c1")
    with redis.Redis.from_url(redis_server.url) as r:
        assert r.get(keys.subscribe_counter(NAME, "c1", "127.0.0.1")) == b"1"
        assert r.get(keys.subscribe_counter(NAME, "c1")) is None


def test_one_consumer_name_on_several_hosts_has_a_count_per_host(topic, worker, redis_server):
    """The same consumer name from two hosts (one application on two machines): each host
    has its own count, so one host's reconnect storm does not lock the other out.  The
    requests are made as the client makes them (``SUBSCRIBE.call``), with the host each
    client would have learnt from Redis."""
    assert topic.post(f"{PATH}/subscribeRate", json=subscribe_rate(1, 30)).status_code == 204
    with redis.Redis.from_url(redis_server.url) as r:
        script = r.register_script(SUBSCRIBE.source)

        def request(host: str, consumer: str) -> None:
            script_keys, args = SUBSCRIBE.call(
                NAME,
                "sub",
                consumer,
                "Shared",
                "latest",
                int(time.time() * 1000),
                "{}",
                3000,
                consumer_name="app",
                client_host=host,
            )
            script(keys=script_keys, args=args)

        request("10.0.0.1", "one")
        with pytest.raises(redis.ResponseError, match=r"Consumer 'app' from 10\.0\.0\.1 may"):
            request("10.0.0.1", "two")
        request("10.0.0.2", "three")
        with pytest.raises(redis.ResponseError, match=r"Consumer 'app' from 10\.0\.0\.2 may"):
            request("10.0.0.2", "four")
