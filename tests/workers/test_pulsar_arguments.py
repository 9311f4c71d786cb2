"""No pulsar-client argument is silently dropped.

pulsar-client's documented parameters of ``Client``, ``create_producer``, ``subscribe``, ``send``
and ``send_async`` (pulsar-client 3.x, written down here) are walked: each is in Sluice's
signature, and each one Sluice does not implement raises ``NotSupported`` naming it when given a
non-default value.  ``deliver_at``, ``deliver_after``, ``ordering_key`` and
``key_shared_policy`` (delayed delivery, Key_Shared) are tested in
``test_delayed_delivery.py`` and ``test_key_shared.py``, ``batching_type`` (key-based
batching) in ``test_key_based_batching.py``.
"""

from __future__ import annotations

import inspect
import re
import threading
import time

import pytest

import sluice

PULSAR_CLIENT = [
    "service_url", "authentication", "operation_timeout_seconds", "io_threads",
    "message_listener_threads", "concurrent_lookup_requests", "log_conf_file_path", "use_tls",
    "tls_trust_certs_file_path", "tls_allow_insecure_connection", "tls_validate_hostname",
    "logger", "connection_timeout_ms", "listener_name", "tls_private_key_file_path",
    "tls_certificate_file_path",
]  # fmt: skip
PULSAR_CREATE_PRODUCER = [
    "topic", "producer_name", "schema", "initial_sequence_id", "send_timeout_millis",
    "compression_type", "max_pending_messages", "max_pending_messages_across_partitions",
    "block_if_queue_full", "batching_enabled", "batching_max_messages",
    "batching_max_allowed_size_in_bytes", "batching_max_publish_delay_ms", "chunking_enabled",
    "message_routing_mode", "lazy_start_partitioned_producers", "properties", "batching_type",
    "encryption_key", "crypto_key_reader", "access_mode", "message_router",
]  # fmt: skip
PULSAR_SUBSCRIBE = [
    "topic", "subscription_name", "consumer_type", "schema", "message_listener",
    "receiver_queue_size", "max_total_receiver_queue_size_across_partitions", "consumer_name",
    "unacked_messages_timeout_ms", "broker_consumer_stats_cache_time_ms",
    "negative_ack_redelivery_delay_ms", "is_read_compacted", "properties",
    "pattern_auto_discovery_period", "initial_position", "crypto_key_reader",
    "replicate_subscription_state_enabled", "max_pending_chunked_message",
    "auto_ack_oldest_chunked_message_on_queue_full", "start_message_id_inclusive",
    "batch_receive_policy", "key_shared_policy", "batch_index_ack_enabled",
    "regex_subscription_mode", "dead_letter_policy", "crypto_failure_action",
]  # fmt: skip
PULSAR_SEND = [
    "content", "properties", "partition_key", "ordering_key", "sequence_id",
    "replication_clusters", "disable_replication", "event_timestamp", "deliver_at",
    "deliver_after",
]  # fmt: skip
PULSAR_SEND_ASYNC = ["content", "callback", *PULSAR_SEND[1:]]

# Implemented and tested in their own files (delayed delivery, Key_Shared, key-based batching).
IMPLEMENTED_ELSEWHERE = {
    "deliver_at", "deliver_after", "ordering_key", "key_shared_policy", "batching_type",
}  # fmt: skip

# Implemented by Sluice (each has its own tests in tests/workers; authentication in
# test_data_plane_acl.py), or, for log_conf_file_path, without effect in pulsar-client itself.
IMPLEMENTED = {
    "Client": {"service_url", "authentication", "operation_timeout_seconds",
               "connection_timeout_ms", "log_conf_file_path"},
    "create_producer": {"topic", "producer_name", "initial_sequence_id", "send_timeout_millis",
                        "max_pending_messages", "max_pending_messages_across_partitions",
                        "block_if_queue_full", "batching_enabled", "batching_max_messages",
                        "batching_max_allowed_size_in_bytes", "batching_max_publish_delay_ms",
                        "message_routing_mode", "properties", "message_router"},
    "subscribe": {"topic", "subscription_name", "consumer_type", "message_listener",
                  "receiver_queue_size", "max_total_receiver_queue_size_across_partitions",
                  "consumer_name", "unacked_messages_timeout_ms",
                  "negative_ack_redelivery_delay_ms", "initial_position", "dead_letter_policy"},
    "send": {"content", "callback", "properties", "partition_key", "sequence_id",
             "disable_replication", "event_timestamp"},
}  # fmt: skip


class Foreign:
    """A value no default equals (an object of pulsar's Sluice knows nothing of)."""

    name = "Foreign"


# A non-default value for each argument Sluice refuses.
NON_DEFAULT = {
    "io_threads": 4, "message_listener_threads": 2,
    "concurrent_lookup_requests": 10, "use_tls": True, "tls_trust_certs_file_path": "/ca.pem",
    "tls_allow_insecure_connection": True, "tls_validate_hostname": True, "logger": Foreign(),
    "listener_name": "external", "tls_private_key_file_path": "/k.pem",
    "tls_certificate_file_path": "/c.pem", "schema": Foreign(), "compression_type": Foreign(),
    "chunking_enabled": True, "lazy_start_partitioned_producers": True,
    "encryption_key": "k", "crypto_key_reader": Foreign(),
    "access_mode": Foreign(), "broker_consumer_stats_cache_time_ms": 1,
    "is_read_compacted": True, "properties": {"a": "b"}, "pattern_auto_discovery_period": 5,
    "replicate_subscription_state_enabled": True, "max_pending_chunked_message": 3,
    "auto_ack_oldest_chunked_message_on_queue_full": True, "start_message_id_inclusive": True,
    "batch_receive_policy": Foreign(),
    "batch_index_ack_enabled": True, "regex_subscription_mode": Foreign(),
    "crypto_failure_action": Foreign(), "replication_clusters": ["east"],
}  # fmt: skip

TOPIC = "persistent://acme/orders/args"
WALKS = [
    ("Client", sluice.Client.__init__, PULSAR_CLIENT),
    ("create_producer", sluice.Client.create_producer, PULSAR_CREATE_PRODUCER),
    ("subscribe", sluice.Client.subscribe, PULSAR_SUBSCRIBE),
    ("send", sluice.Producer.send, PULSAR_SEND),
    ("send", sluice.Producer.send_async, PULSAR_SEND_ASYNC),
]


@pytest.mark.parametrize(
    ("call", "function", "names"), WALKS, ids=[w[1].__qualname__ for w in WALKS]
)
def test_every_pulsar_argument_is_in_the_signature_in_pulsar_order(call, function, names):
    parameters = [p for p in inspect.signature(function).parameters if p != "self"]
    assert parameters[: len(names)] == names  # positional calls keep their meaning
    assert not any(
        p.kind is inspect.Parameter.VAR_KEYWORD
        for p in inspect.signature(function).parameters.values()
    ), "a **kwargs would drop unknown arguments silently"


def refused(call: str, names: list[str]) -> list[str]:
    return [n for n in names if n not in IMPLEMENTED[call] and n not in IMPLEMENTED_ELSEWHERE]


def test_the_walk_covers_what_the_test_values_name():
    walked = {n for call, _f, names in WALKS for n in refused(call, names)}
    assert walked == set(NON_DEFAULT)


@pytest.mark.parametrize("name", refused("Client", PULSAR_CLIENT))
def test_client_refuses_what_it_does_not_implement(redis_server, name):
    with pytest.raises(sluice.NotSupported, match=name):
        sluice.Client(redis_server.url, **{name: NON_DEFAULT[name]})


@pytest.mark.parametrize("name", refused("create_producer", PULSAR_CREATE_PRODUCER))
def test_create_producer_refuses_what_it_does_not_implement(client, namespace, name):
    with pytest.raises(sluice.NotSupported, match=name):
        client.create_producer(TOPIC, **{name: NON_DEFAULT[name]})


@pytest.mark.parametrize("name", refused("subscribe", PULSAR_SUBSCRIBE))
def test_subscribe_refuses_what_it_does_not_implement(client, namespace, name):
    with pytest.raises(sluice.NotSupported, match=name):
        client.subscribe(TOPIC, "s", **{name: NON_DEFAULT[name]})


@pytest.mark.parametrize("name", refused("send", PULSAR_SEND))
def test_send_refuses_what_it_does_not_implement(client, namespace, name):
    producer = client.create_producer(TOPIC)
    with pytest.raises(sluice.NotSupported, match=name):
        producer.send(b"x", **{name: NON_DEFAULT[name]})
    with pytest.raises(sluice.NotSupported, match=name):
        producer.send_async(b"x", None, **{name: NON_DEFAULT[name]})
    producer.close()


def test_authentication_other_than_a_token_is_refused(admin_server):
    with pytest.raises(sluice.NotSupported, match="authentication"):
        sluice.Client(admin_server.url, authentication=Foreign())


def test_defaults_are_pulsar_clients(client, namespace):
    """Given pulsar's defaults explicitly, nothing is refused; batching is off by default, as
    in pulsar-client's create_producer."""
    assert (
        inspect.signature(sluice.Client.create_producer).parameters["batching_enabled"].default
        is False
    )
    producer = client.create_producer(
        TOPIC, compression_type="NONE", access_mode="Shared", batching_type="Default",
        max_pending_messages=1000, block_if_queue_full=False,
    )  # fmt: skip
    producer.send(b"x", disable_replication=True)
    producer.close()


def test_dead_letter_initial_subscription_name_is_refused(client, namespace):
    policy = sluice.DeadLetterPolicy(max_redeliver_count=1, initial_subscription_name="dlq-sub")
    with pytest.raises(sluice.NotSupported, match="initial_subscription_name"):
        client.subscribe(TOPIC, "s", dead_letter_policy=policy)


def test_sequence_ids_follow_initial_sequence_id_and_explicit_ids(client, namespace):
    producer = client.create_producer(TOPIC, initial_sequence_id=41)
    assert producer.last_sequence_id() == 41
    producer.send(b"a")
    assert producer.last_sequence_id() == 42
    producer.send(b"b", sequence_id=100)
    assert producer.last_sequence_id() == 100
    producer.send(b"c")
    assert producer.last_sequence_id() == 101
    producer.close()


def test_message_listener_gets_every_message(client, namespace):
    got: list[bytes] = []
    done = threading.Event()

    def listener(consumer, message):
        got.append(message.data())
        consumer.acknowledge(message)
        if len(got) == 3:
            done.set()

    consumer = client.subscribe(TOPIC, "listen", message_listener=listener)
    with pytest.raises(sluice.InvalidConfiguration):
        consumer.receive(timeout_millis=10)
    producer = client.create_producer(TOPIC)
    for i in range(3):
        producer.send(f"l{i}".encode())
    assert done.wait(10)
    assert got == [b"l0", b"l1", b"l2"]
    consumer.close()
    producer.close()


def test_send_async_does_not_wait_and_a_full_queue_is_pulsars_error(client, namespace, http):
    """send_async returns before the entry is stored; past max_pending_messages it calls back
    with ProducerQueueIsFull at once (block_if_queue_full off) or waits for room (on)."""
    producer = client.create_producer(TOPIC, max_pending_messages=5)
    results: list[sluice.Result] = []
    started = time.monotonic()
    for _ in range(200):
        producer.send_async(b"q", lambda result, _id: results.append(result))
    enqueue_seconds = time.monotonic() - started
    producer.flush()
    assert sluice.Result.ProducerQueueIsFull in results
    assert results.count(sluice.Result.Ok) >= 5
    assert len(results) == 200
    producer.close()
    # 200 calls that each waited for a Redis round trip would take far longer.
    assert enqueue_seconds < 2

    blocking = client.create_producer(TOPIC, max_pending_messages=5, block_if_queue_full=True)
    ok: list[sluice.Result] = []
    for _ in range(200):
        blocking.send_async(b"b", lambda result, _id: ok.append(result))
    blocking.flush()
    assert ok == [sluice.Result.Ok] * 200
    blocking.close()


def test_a_topic_pattern_is_refused(client, namespace):
    with pytest.raises(sluice.NotSupported, match="pattern"):
        client.subscribe(re.compile("persistent://acme/orders/.*"), "s")


def test_a_blocking_send_does_not_wait_out_the_batch_delay(client, namespace):
    producer = client.create_producer(
        TOPIC, batching_enabled=True, batching_max_publish_delay_ms=5000
    )
    started = time.monotonic()
    for i in range(3):
        producer.send(f"s{i}".encode())
    assert time.monotonic() - started < 2.5  # three waits of the 5 s delay would be 15 s
    producer.close()
