"""The publish rate through the real client against a real worker.

``produce.lua`` counts each partition's messages (a batch entry counts its messages) and
payload bytes in windows of one second that open with the first send after the previous one
ended; a send that does not fit is not written and the producer waits for the next window.
So, read back from the stream on Redis's clock (the entries' publish time ``t``, the clock
the windows use), by T seconds after the first entry at most LIMIT x (floor(T) + 1) messages
were written, exactly; and no send fails.  No test waits after a policy write: a write
answered 2xx is in force.
"""

from __future__ import annotations

import threading
import time

import pytest
import redis

import sluice
from sluice.protocol import keys
from sluice.protocol.frames import wake_data
from sluice.protocol.names import TopicName
from sluice.protocol.scripts import PRODUCE_SCRIPT
from tests.workers.conftest import ADMIN, wait_until

TOPIC = "persistent://acme/orders/paced"
PATH = f"{ADMIN}/persistent/acme/orders/paced"
NS = f"{ADMIN}/namespaces/acme/orders"
NAME = TopicName.from_full(TOPIC)


def publish(msg: int = -1, byte: int = -1) -> dict:
    return {"publishThrottlingRateInMsg": msg, "publishThrottlingRateInByte": byte}


@pytest.fixture
def topic(http, namespace):
    """The non-partitioned topic ``paced``."""
    assert http.put(PATH).status_code == 204
    return http


def written(redis_server, partition: TopicName = NAME) -> list[tuple[int, int, int]]:
    """(publish time ms, messages, payload bytes) of every entry, in stream order."""
    with redis.Redis.from_url(redis_server.url) as r:
        rows = r.xrange(keys.log(partition))
    return [(int(f[b"t"]), int(f.get(b"n", 1)), len(f[b"d"])) for _id, f in rows]


def redis_now_ms(redis_server) -> int:
    with redis.Redis.from_url(redis_server.url) as r:
        seconds, micros = r.time()
    return seconds * 1000 + micros // 1000


def assert_bound(rows: list[tuple[int, int, int]], limit: int, column: int = 1) -> None:
    """By T seconds after the first entry at most limit x (floor(T) + 1) (messages, or with
    ``column=2`` bytes) were written: checked after every entry."""
    first = rows[0][0]
    total = 0
    for row in rows:
        total += row[column]
        allowed = limit * ((row[0] - first) // 1000 + 1)
        assert total <= allowed, f"{total} > {allowed} at {row[0] - first} ms"


def send_for(producer: sluice.Producer, seconds: float, payload: bytes = b"m") -> int:
    """Send as fast as the producer is let, for ``seconds``; every send must succeed."""
    sent = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        producer.send(payload)
        sent += 1
    return sent


def test_a_fast_producer_is_held_to_the_rate_and_nothing_fails(topic, worker, client, redis_server):
    assert topic.post(f"{NS}/publishRate", json=publish(100)).status_code == 204
    producer = client.create_producer(TOPIC)
    started = time.monotonic()
    sent = send_for(producer, 3.5)
    elapsed = time.monotonic() - started
    rows = written(redis_server)
    assert len(rows) == sent  # none refused, none lost
    assert_bound(rows, 100)
    # Slowed, not stopped: about 100 a second (20 % below allows for a busy machine) ...
    assert sent >= 0.8 * 100 * int(elapsed)
    # ... by waiting for the next window, once in every window but the last.
    assert producer.publish_throttled_count() >= int(elapsed) - 1
    # The stats show the sends the rate held back (the worker publishes them every second):
    # in all, and in the current stats interval, which starts again from 0 (as in Pulsar).
    stats = wait_until(
        lambda: (s := topic.get(f"{PATH}/stats").json())["msgInCounter"] == sent and s
    )
    total = stats["totalPublishRateLimitedCounter"]
    assert total >= producer.publish_throttled_count()
    assert 0 <= stats["publishRateLimitedTimes"] <= total
    # No more sends: the next interval (1 s here) counts none, the total stays.
    stats = wait_until(
        lambda: (s := topic.get(f"{PATH}/stats").json())["publishRateLimitedTimes"] == 0 and s
    )
    assert stats["totalPublishRateLimitedCounter"] == total


def test_the_byte_rate_counts_payload_bytes(topic, worker, client, redis_server):
    assert topic.post(f"{PATH}/publishRate", json=publish(byte=10_000)).status_code == 204
    producer = client.create_producer(TOPIC)
    sent = send_for(producer, 2.5, payload=b"x" * 1000)
    rows = written(redis_server)
    assert len(rows) == sent
    assert_bound(rows, 10_000, column=2)
    assert sent >= 0.8 * 10 * 2


def test_a_batch_counts_its_messages(topic, worker, client, redis_server):
    assert topic.post(f"{PATH}/publishRate", json=publish(50)).status_code == 204
    producer = client.create_producer(
        TOPIC,
        batching_enabled=True,
        batching_max_messages=10,
        batching_max_publish_delay_ms=5,
        block_if_queue_full=True,  # the loop is slowed with the producer, as in Pulsar
    )
    results: list[sluice.Result] = []
    deadline = time.monotonic() + 2.5
    while time.monotonic() < deadline:
        producer.send_async(b"b", lambda result, _id: results.append(result))
    producer.flush()
    rows = written(redis_server)
    assert sum(n for _t, n, _b in rows) == len(results)
    assert set(results) == {sluice.Result.Ok}
    assert any(n > 1 for _t, n, _b in rows)  # batches were written
    assert_bound(rows, 50)
    assert len(results) >= 0.8 * 50 * 2  # slowed to the rate, not stopped


def test_a_batch_larger_than_a_window_takes_the_windows_it_needs(
    topic, worker, client, redis_server
):
    assert topic.post(f"{PATH}/publishRate", json=publish(10)).status_code == 204
    producer = client.create_producer(
        TOPIC, batching_enabled=True, batching_max_messages=25, batching_max_publish_delay_ms=5000
    )
    for _ in range(25):
        producer.send_async(b"b", None)
    producer.flush()  # one entry of 25 messages: written at once, into an empty window
    producer.send_async(b"after", None)
    producer.flush()  # waits until the 3 windows the batch needed have passed
    [(batch_t, batch_n, _), (next_t, _, _)] = written(redis_server)
    assert batch_n == 25
    assert 3000 <= next_t - batch_t < 4000  # 1 s allows for a busy machine
    assert producer.publish_throttled_count() == 1


def test_each_partition_has_its_own_rate(http, namespace, worker, client, redis_server):
    name = TopicName.from_full("persistent://acme/orders/wide")
    assert http.put(f"{ADMIN}/persistent/acme/orders/wide/partitions", json=2).status_code == 204
    assert http.post(f"{NS}/publishRate", json=publish(50)).status_code == 204
    producer = client.create_producer(name.full)
    sent = send_for(producer, 2.5)
    per_partition = [written(redis_server, name.partition(i)) for i in range(2)]
    for rows in per_partition:
        assert_bound(rows, 50)
    assert sum(len(rows) for rows in per_partition) == sent
    # More than one partition's bound over the same time: the limit is not the topic's.
    assert sent > 50 * 3


def test_a_send_that_cannot_fit_before_its_timeout_times_out(topic, worker, client, redis_server):
    assert topic.post(f"{PATH}/publishRate", json=publish(1)).status_code == 204
    producer = client.create_producer(TOPIC, send_timeout_millis=300)
    producer.send(b"first")
    with pytest.raises(sluice.Timeout, match="held by the publish rate of " + TOPIC):
        producer.send(b"second")
    assert len(written(redis_server)) == 1


class Sender(threading.Thread):
    """Sends as fast as it is let until stopped."""

    def __init__(self, producer: sluice.Producer) -> None:
        super().__init__(daemon=True)
        self.producer = producer
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self.producer.send(b"s")
        except BaseException as exc:
            self.error = exc


def test_a_changed_rate_is_in_force_when_the_write_is_answered(topic, worker, client, redis_server):
    assert topic.post(f"{PATH}/publishRate", json=publish(200)).status_code == 204
    sender = Sender(client.create_producer(TOPIC))
    sender.start()
    try:
        time.sleep(1.5)
        # Lowered: from the answer on, the window in progress takes at most 20 more and
        # every later window 20, whatever the old limit let through before.
        assert topic.post(f"{PATH}/publishRate", json=publish(20)).status_code == 204
        lowered = redis_now_ms(redis_server)
        time.sleep(3.0)
        # Raised: more gets through right after the answer than the old limit ever allows.
        assert topic.post(f"{PATH}/publishRate", json=publish(500)).status_code == 204
        raised = redis_now_ms(redis_server)
        time.sleep(2.0)
    finally:
        sender.stop.set()
        sender.join(10)
    assert sender.error is None
    times = [t for t, _n, _b in written(redis_server)]
    after_lowering = [t for t in times if lowered <= t < lowered + 3000]
    assert len(after_lowering) <= 20 + 20 * (3 + 1)
    before_lowering = [t for t in times if lowered - 1000 <= t < lowered]
    assert len(before_lowering) > 20 * 2  # the old limit was in force until then
    after_raising = [t for t in times if raised <= t < raised + 2000]
    assert len(after_raising) > 20 + 20 * (2 + 1)


def test_a_raw_produce_call_is_held_to_the_rate_too(topic, worker, client, redis_server):
    """A raw EVALSHA of produce.lua without the window's key is counted in the same window;
    a refused call writes nothing and names the milliseconds to wait."""
    assert topic.post(f"{PATH}/publishRate", json=publish(3)).status_code == 204
    script = client.scripts["produce"]

    def produce(count: int, script_keys: list[str]):
        args = [keys.WAKE_CHANNEL, wake_data(TOPIC), count, *([1, "d", b"x"] * count)]
        return script(keys=script_keys, args=args)

    produce(2, PRODUCE_SCRIPT.keys(NAME))
    with pytest.raises(redis.exceptions.ResponseError, match=r"^PublishRateLimited (\d+) ") as held:
        produce(2, PRODUCE_SCRIPT.keys(NAME)[:3])  # two entries, one place left: neither is written
    assert 0 < int(str(held.value).split()[1]) <= 1000
    produce(1, PRODUCE_SCRIPT.keys(NAME)[:3])
    assert len(written(redis_server)) == 3
