"""A topic with more partitions than one pipelined batch: created, used and deleted whole."""

from __future__ import annotations

import redis

from tests.workers.conftest import ADMIN, wait_until

PARTITIONS = 300


def test_a_wide_topic_is_served_and_its_data_dropped_on_delete(
    http, worker, client, namespace, redis_server
):
    topic = f"persistent://{namespace}/wide"
    path = f"{ADMIN}/persistent/{namespace}/wide"
    assert http.put(f"{path}/partitions", json=PARTITIONS).status_code == 204
    assert http.put(f"{path}/subscription/audit").status_code == 204
    producer = client.create_producer(topic)
    for i in range(PARTITIONS):
        producer.send(b"m", partition_key=f"k{i}")
    producer.flush()
    # The owning worker publishes partition stats periodically: wait for the last of them.
    wait_until(lambda: http.get(f"{path}/partitioned-stats").json()["msgInCounter"] == PARTITIONS)
    producer.close()
    assert http.delete(f"{path}/partitions").status_code == 204
    plain = redis.Redis.from_url(redis_server.url)
    try:
        # Every partition's stream, subscription and counters go, not just the first batch's.
        wait_until(lambda: not plain.keys("sl:{acme/orders/wide-*:log"), timeout=15)
        wait_until(lambda: not plain.keys("sl:{acme/orders/wide-*:s:audit:*"), timeout=15)
    finally:
        plain.close()
