"""OpenTelemetry spans of sends and receives (``sluice.tracing``), caught by the SDK's
in-memory exporter: a send span (PRODUCER) per message, a receive span (CONSUMER) that is its
child in the same trace through the ``traceparent`` the message carries, the messaging
semantic conventions' attributes; and nothing at all when tracing is off."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import sluice
from tests.workers.conftest import ADMIN

TOPIC = "persistent://acme/orders/traced"


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def test_a_receive_span_is_the_child_of_its_send_span(http, namespace, worker, settings, spans):
    provider, exporter = spans
    assert http.put(f"{ADMIN}/persistent/acme/orders/traced/partitions", json=2).status_code == 204
    with sluice.Client(settings.redis_url, tracer_provider=provider) as client:
        consumer = client.subscribe(TOPIC, "audit", consumer_type=sluice.ConsumerType.Shared)
        producer = client.create_producer(TOPIC)
        sent = [producer.send(f"m{i}".encode(), properties={"k": "v"}) for i in range(3)]
        received = [consumer.receive(10_000) for _ in range(3)]
    finished = exporter.get_finished_spans()
    sends = [s for s in finished if s.kind is SpanKind.PRODUCER]
    receives = [s for s in finished if s.kind is SpanKind.CONSUMER]
    assert len(sends) == 3 and len(receives) == 3
    by_id = {s.attributes["messaging.message.id"]: s for s in sends}
    assert set(by_id) == {str(m) for m in sent}
    for message, span in zip(received, receives, strict=True):
        parent = by_id[str(message.message_id())]
        assert span.parent is not None and span.parent.span_id == parent.context.span_id
        assert span.context.trace_id == parent.context.trace_id
        assert span.name == f"receive {TOPIC}"
        assert span.attributes["messaging.system"] == "sluice"
        assert span.attributes["messaging.operation.type"] == "receive"
        assert span.attributes["messaging.destination.subscription.name"] == "audit"
        assert span.attributes["messaging.destination.name"] == message.topic_name()
        # The context travels in the properties beside the application's own.
        assert message.properties()["k"] == "v"
        assert (
            message.properties()["traceparent"].split("-")[1] == f"{parent.context.trace_id:032x}"
        )
    for span in sends:
        assert span.name == f"send {TOPIC}"
        assert span.attributes["messaging.operation.type"] == "send"
        assert span.attributes["messaging.destination.name"] == TOPIC
        assert span.attributes["messaging.message.body.size"] == 2
        assert span.status.status_code is not StatusCode.ERROR


def test_a_failed_send_ends_its_span_with_the_error(http, namespace, worker, settings, spans):
    provider, exporter = spans
    assert http.put(f"{ADMIN}/persistent/acme/orders/traced").status_code == 204
    with sluice.Client(settings.redis_url, tracer_provider=provider) as client:
        producer = client.create_producer(TOPIC)
        with pytest.raises(sluice.MessageTooBig):
            producer.send(b"x" * (5 * 1024 * 1024 + 1))
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == "MessageTooBig"


def test_tracing_is_off_by_default(http, namespace, worker, settings, spans):
    _provider, exporter = spans
    assert http.put(f"{ADMIN}/persistent/acme/orders/traced").status_code == 204
    with sluice.Client(settings.redis_url) as client:
        assert client.tracing is None
        consumer = client.subscribe(TOPIC, "audit")
        client.create_producer(TOPIC).send(b"plain")
        message = consumer.receive(10_000)
    assert "traceparent" not in message.properties()
    assert exporter.get_finished_spans() == ()


def test_the_worker_traces_its_dispatch_calls(http, namespace, worker, settings, spans):
    """With a tracer (SLUICE_WORKER_TRACING), each dispatch call that handed out messages or
    met a limit is a span, with the messaging attributes; without one, none is made."""
    from workers.tracing import DispatchTracer

    provider, exporter = spans
    assert http.put(f"{ADMIN}/persistent/acme/orders/traced").status_code == 204
    rate = {"dispatchThrottlingRateInMsg": 5, "ratePeriodInSecond": 1}
    path = f"{ADMIN}/persistent/acme/orders/traced/dispatchRate"
    assert http.post(path, json=rate).status_code == 204
    worker.call(lambda w: setattr(w.shared, "tracer", DispatchTracer(provider)))
    with sluice.Client(settings.redis_url) as client:  # the client itself traces nothing
        consumer = client.subscribe(TOPIC, "audit", consumer_type=sluice.ConsumerType.Shared)
        producer = client.create_producer(TOPIC)
        for i in range(8):
            producer.send(f"m{i}".encode())
        got = [consumer.receive(10_000) for _ in range(8)]
        worker.call(lambda w: setattr(w.shared, "tracer", None))
        producer.send(b"untraced")
        consumer.receive(10_000)
    assert len(got) == 8
    spans_made = exporter.get_finished_spans()
    assert spans_made and all(s.name == f"dispatch {TOPIC}" for s in spans_made)
    assert all(s.kind is SpanKind.INTERNAL for s in spans_made)
    delivered = [s for s in spans_made if s.attributes["sluice.dispatch.entries"] > 0]
    assert sum(s.attributes["messaging.batch.message_count"] for s in delivered) == 8
    assert any(s.attributes.get("sluice.throttled") == "messages" for s in spans_made)
    for span in spans_made:
        assert span.attributes["messaging.system"] == "sluice"
        assert span.attributes["messaging.operation.name"] == "dispatch"
        assert span.attributes["messaging.destination.subscription.name"] == "audit"
        assert span.end_time >= span.start_time
