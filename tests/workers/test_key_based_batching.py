"""Key-based batching (``batching_type=BatchingType.KeyBased``) against a real worker and Redis.

What is checked is what users see: the entries the producer stores (read back from the
partition's stream), the ids its callbacks get, and what Key_Shared consumers receive.  The
same Key_Shared run with default batching is the control: there, batches mix keys and
consumers get keys that are not theirs.
"""

from __future__ import annotations

import threading
import time

import pytest

import sluice
from sluice.protocol import keys
from sluice.protocol.frames import unpack_batch
from sluice.protocol.names import TopicName
from tests.workers.conftest import ADMIN, wait_until
from tests.workers.test_key_shared import Receiver, first_seen_in_order

TOPIC = "persistent://acme/orders/keybatch"
PATH = f"{ADMIN}/persistent/acme/orders/keybatch"
LONG_DELAY_MS = 60_000  # no batch goes out by its delay while a test looks


def entries(client: sluice.Client, partition: str = TOPIC) -> list[tuple[str, list[str]]]:
    """The stored entries: (stream id, the key of each message in it, in order)."""
    found = []
    for raw_id, fields in client.redis.xrange(keys.log(TopicName.from_full(partition))):
        if b"n" in fields:
            message_keys = [key or "" for _p, key, _props, _t in unpack_batch(fields[b"d"])]
        else:
            message_keys = [fields.get(b"k", b"").decode()]
        found.append((raw_id.decode(), message_keys))
    return found


class Callbacks:
    """``send_async`` callbacks, in the order they ran: (payload, result, message id)."""

    def __init__(self) -> None:
        self.got: list[tuple[bytes, sluice.Result, sluice.MessageId | None]] = []
        self._lock = threading.Lock()

    def for_(self, payload: bytes):
        def callback(result, message_id):
            with self._lock:
                self.got.append((payload, result, message_id))

        return callback

    def ids(self) -> dict[bytes, sluice.MessageId]:
        assert {result for _p, result, _m in self.got} == {sluice.Result.Ok}
        return {payload: mid for payload, _r, mid in self.got}


def keyed_producer(client, **options) -> sluice.Producer:
    return client.create_producer(
        TOPIC,
        batching_enabled=True,
        batching_type=sluice.BatchingType.KeyBased,
        batching_max_publish_delay_ms=options.pop("delay", LONG_DELAY_MS),
        **options,
    )


def test_each_entry_holds_one_key_and_the_ids_say_where_each_message_is(http, namespace, client):
    assert http.put(PATH).status_code == 204
    producer = keyed_producer(client)
    callbacks = Callbacks()
    sent: dict[str, list[bytes]] = {}
    for seq in range(4):
        for key in ("a", "b", None, "c"):
            payload = f"{key}:{seq}".encode()
            producer.send_async(payload, callbacks.for_(payload), partition_key=key)
            sent.setdefault(key or "", []).append(payload)
    time.sleep(0.3)
    assert entries(client) == [] and callbacks.got == []  # waiting in the batches
    producer.flush()
    assert len(callbacks.got) == 16  # flush returned after every callback
    stored = entries(client)
    # One entry per key (no key is a key of its own), in the order of their first messages.
    assert [message_keys for _id, message_keys in stored] == [
        ["a"] * 4,
        ["b"] * 4,
        [""] * 4,
        ["c"] * 4,
    ]
    ids = callbacks.ids()
    for (stream_id, _keys), key in zip(stored, ["a", "b", "", "c"], strict=True):
        for index, payload in enumerate(sent[key]):  # per-key order inside the entry
            assert ids[payload].stream_id == stream_id
            assert ids[payload].batch_index() == index
    assert producer.last_sequence_id() == 15
    # What a subscription reads back is the same messages, each key's in its order.
    consumer = client.subscribe(TOPIC, "all", initial_position=sluice.InitialPosition.Earliest)
    received = [consumer.receive(timeout_millis=5000) for _ in range(16)]
    assert [m.message_id() for m in received] == [ids[m.data()] for m in received]
    assert [m.data() for m in received] == sent["a"] + sent["b"] + sent[""] + sent["c"]
    producer.close()


def test_the_ordering_key_groups_before_the_partition_key(http, namespace, client):
    assert http.put(PATH).status_code == 204
    producer = keyed_producer(client)
    producer.send_async(b"1", None, partition_key="p1", ordering_key="order-7")
    producer.send_async(b"2", None, partition_key="p2")
    producer.send_async(b"3", None, partition_key="p2", ordering_key="order-7")
    producer.flush()
    raw = client.redis.xrange(keys.log(TopicName.from_full(TOPIC)))
    assert [(f.get(b"o"), f.get(b"k"), f.get(b"n")) for _id, f in raw] == [
        (b"order-7", b"p1", b"2"),  # one entry, routed by order-7 on Key_Shared
        (None, b"p2", None),
    ]
    producer.close()


def test_a_full_container_sends_every_key_batch(http, namespace, client):
    """``batching_max_messages`` counts the partition's messages of all keys together: the
    message that fills it sends every key's batch, each its own entry (as pulsar-client's
    key-based container does)."""
    assert http.put(PATH).status_code == 204
    producer = keyed_producer(client, batching_max_messages=6)
    callbacks = Callbacks()
    for i, key in enumerate(["x", "y", "x", "z", "y"]):
        producer.send_async(str(i).encode(), callbacks.for_(str(i).encode()), partition_key=key)
    time.sleep(0.3)
    assert entries(client) == []  # 5 of 6: nothing sent yet
    producer.send_async(b"5", callbacks.for_(b"5"), partition_key="x")
    wait_until(lambda: len(callbacks.got) == 6, timeout=5)  # without a flush
    assert [message_keys for _id, message_keys in entries(client)] == [
        ["x", "x", "x"],
        ["y", "y"],
        ["z"],
    ]
    ids = callbacks.ids()
    assert [ids[p].batch_index() for p in (b"0", b"2", b"5")] == [0, 1, 2]
    assert ids[b"3"].batch_index() == -1  # a batch of one is stored as a plain entry
    producer.close()


def test_the_size_limit_and_the_delay_count_the_whole_container(http, namespace, client):
    assert http.put(PATH).status_code == 204
    producer = keyed_producer(client, batching_max_allowed_size_in_bytes=1000)
    for key in ("a", "b"):
        producer.send_async(b"." * 310, None, partition_key=key)  # ~340 bytes each
    time.sleep(0.3)
    assert entries(client) == []
    producer.send_async(b"." * 310, None, partition_key="c")  # 3 x ~340 bytes: full
    wait_until(lambda: len(entries(client)) == 3, timeout=5)
    producer.close()
    timed = keyed_producer(client, delay=200)
    started = time.monotonic()
    for key in ("d", "e", "d"):
        timed.send_async(key.encode(), None, partition_key=key)
    wait_until(lambda: len(entries(client)) == 5, timeout=5)  # by the delay, no flush
    assert time.monotonic() - started >= 0.15
    assert [k for _id, k in entries(client)][3:] == [["d", "d"], ["e"]]
    timed.close()


def test_a_blocking_send_sends_the_batches_at_once(http, namespace, client):
    assert http.put(PATH).status_code == 204
    producer = keyed_producer(client)
    callbacks = Callbacks()
    producer.send_async(b"a0", callbacks.for_(b"a0"), partition_key="a")
    producer.send_async(b"b0", callbacks.for_(b"b0"), partition_key="b")
    message_id = producer.send(b"a1", partition_key="a")
    assert (message_id.batch_index(), callbacks.ids()[b"a0"].batch_index()) == (1, 0)
    assert message_id.stream_id == callbacks.ids()[b"a0"].stream_id
    assert [k for _id, k in entries(client)] == [["a", "a"], ["b"]]
    producer.close()


def test_partitions_batch_apart_and_each_key_stays_on_its_partition(http, namespace, client):
    assert http.put(f"{PATH}/partitions", json=3).status_code == 204
    producer = keyed_producer(client)
    callbacks = Callbacks()
    for seq in range(3):
        for k in range(9):
            payload = f"{k}:{seq}".encode()
            producer.send_async(payload, callbacks.for_(payload), partition_key=f"key-{k}")
    producer.flush()
    ids = callbacks.ids()
    stored = {p: entries(client, f"{TOPIC}-partition-{p}") for p in range(3)}
    assert sum(len(e) for e in stored.values()) == 9  # one entry per key
    for p, found in stored.items():
        for stream_id, message_keys in found:
            assert len(set(message_keys)) == 1 and len(message_keys) == 3
            k = message_keys[0].removeprefix("key-")
            assert [ids[f"{k}:{s}".encode()].partition() for s in range(3)] == [p] * 3
            assert [ids[f"{k}:{s}".encode()].stream_id for s in range(3)] == [stream_id] * 3
    producer.close()


def key_shared_run(client, batching_type: sluice.BatchingType, max_messages: int) -> list[Receiver]:
    """Three Key_Shared consumers; 40 keys x 5 messages sent interleaved, batched."""
    receivers = [
        Receiver(
            client.subscribe(
                TOPIC, "ks", consumer_type=sluice.ConsumerType.KeyShared, consumer_name=f"c{i}"
            )
        )
        for i in range(3)
    ]
    producer = client.create_producer(
        TOPIC,
        batching_enabled=True,
        batching_type=batching_type,
        batching_max_messages=max_messages,
        batching_max_publish_delay_ms=LONG_DELAY_MS,
    )
    for seq in range(5):
        for k in range(40):
            producer.send_async(f"{k}:{seq}".encode(), None, partition_key=f"key-{k}")
    producer.flush()
    wait_until(lambda: sum(len(r.log) for r in receivers) >= 200, timeout=20)
    for r in receivers:
        r.stop()
    producer.close()
    return receivers


def overlapping_keys(receivers: list[Receiver]) -> set[str]:
    sets = [r.keys() for r in receivers]
    return {k for i, s in enumerate(sets) for t in sets[i + 1 :] for k in s & t}


def test_key_shared_consumers_get_only_their_keys_in_order(http, namespace, client):
    assert http.put(PATH).status_code == 204
    receivers = key_shared_run(client, sluice.BatchingType.KeyBased, max_messages=100)
    # 100 messages = 2.5 rounds of the 40 keys: entries of 2 or 3 messages of one key.
    assert {len(set(k)) for _id, k in entries(client)} == {1}
    assert {len(k) for _id, k in entries(client)} == {2, 3}
    assert all(r.keys() for r in receivers), [len(r.keys()) for r in receivers]
    assert overlapping_keys(receivers) == set()
    assert set().union(*(r.keys() for r in receivers)) == {f"key-{k}" for k in range(40)}
    first_seen_in_order(receivers, keys=40, per_key=5)
    assert sum(len(r.log) for r in receivers) == 200  # nothing twice


def test_control_default_batching_mixes_keys_on_key_shared(http, namespace, client):
    """The same run with default batching: an entry goes by its first message's key, so the
    other keys in it reach a consumer that does not own them (why KeyBased exists).  Batches
    of 7 start with many different keys, so the entries go to every consumer."""
    assert http.put(PATH).status_code == 204
    receivers = key_shared_run(client, sluice.BatchingType.Default, max_messages=7)
    assert overlapping_keys(receivers)


@pytest.mark.parametrize("value", [1, "KEY_BASED", sluice.ConsumerType.Shared, object()])
def test_a_wrong_batching_type_is_an_invalid_configuration(namespace, client, value):
    with pytest.raises(sluice.InvalidConfiguration, match="batching_type"):
        client.create_producer(TOPIC, batching_type=value)


def test_batching_type_does_nothing_without_batching(http, namespace, client):
    """As in pulsar-client, the batching type is for a batching producer: with batching off
    (the default) every message is its own entry."""
    assert http.put(PATH).status_code == 204
    producer = client.create_producer(TOPIC, batching_type=sluice.BatchingType.KeyBased)
    producer.send_async(b"1", None, partition_key="a")
    producer.send_async(b"2", None, partition_key="a")
    producer.flush()
    assert [k for _id, k in entries(client)] == [["a"], ["a"]]
    producer.close()
