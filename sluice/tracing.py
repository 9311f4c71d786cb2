"""OpenTelemetry traces of sends and receives (optional: ``pip install 'sluice-client[tracing]'``).

Off by default: ``sluice.Client(url, tracer_provider=...)`` turns it on with an OpenTelemetry
``TracerProvider`` (``True``: the global one).  Off, nothing of OpenTelemetry is imported and
a send or a receive tests one attribute, nothing more.

On, each send is a span ``send <topic>`` (kind PRODUCER) from the call until the message is
stored (or failed), and each message handed out by ``receive`` a span ``receive <topic>``
(kind CONSUMER).  The send span's context travels in the message's properties as W3C
``traceparent`` (and ``tracestate``), so the receive span is its child, in the same trace,
whichever process receives it.  Attributes follow OpenTelemetry's messaging semantic
conventions: ``messaging.system`` ``sluice``, ``messaging.operation.type`` (``send``,
``receive``), ``messaging.operation.name``, ``messaging.destination.name`` (the topic, a
partition's name on receive), ``messaging.destination.subscription.name``,
``messaging.message.id``, ``messaging.message.body.size`` and, on error,
``error.type``.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from sluice.errors import InvalidConfiguration

SYSTEM = "sluice"
CONTEXT_KEYS = ("traceparent", "tracestate")


def opentelemetry_trace(what: str) -> Any:
    """OpenTelemetry's ``trace`` module; ``InvalidConfiguration`` naming ``what`` needs it
    when the ``tracing`` extra is not installed."""
    try:
        from opentelemetry import trace
    except ImportError:
        raise InvalidConfiguration(
            f"{what} needs OpenTelemetry: pip install 'sluice-client[tracing]'"
        ) from None
    return trace


class Tracing:
    """The spans of one client (made only when tracing is on)."""

    def __init__(self, provider: object) -> None:
        trace = opentelemetry_trace("tracing")
        from opentelemetry import propagate

        self._trace = trace
        self._propagate = propagate
        source: Any = trace.get_tracer_provider() if provider is True else provider
        self._tracer = source.get_tracer("sluice")

    def send(self, topic: str, properties: dict[str, str], size: int) -> Any:
        """Start a send span and put its context into ``properties``; the span."""
        span = self._tracer.start_span(
            f"send {topic}",
            kind=self._trace.SpanKind.PRODUCER,
            attributes={
                "messaging.system": SYSTEM,
                "messaging.operation.type": "send",
                "messaging.operation.name": "send",
                "messaging.destination.name": topic,
                "messaging.message.body.size": size,
            },
        )
        self._propagate.inject(properties, context=self._trace.set_span_in_context(span))
        return span

    def sent(self, span: Any, future: Future) -> None:
        """End a send span when its message is stored (or failed)."""

        def done(result: Future) -> None:
            error = result.exception()
            if error is None:
                span.set_attribute("messaging.message.id", str(result.result()))
            else:
                span.set_attribute("error.type", type(error).__name__)
                span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, str(error)))
            span.end()

        future.add_done_callback(done)

    def received(self, topic: str, subscription: str, message: Any) -> None:
        """A receive span, child of the send span whose context the message carries."""
        carried = {k: v for k, v in message.properties().items() if k in CONTEXT_KEYS}
        span = self._tracer.start_span(
            f"receive {topic}",
            context=self._propagate.extract(carried) if carried else None,
            kind=self._trace.SpanKind.CONSUMER,
            attributes={
                "messaging.system": SYSTEM,
                "messaging.operation.type": "receive",
                "messaging.operation.name": "receive",
                "messaging.destination.name": message.topic_name(),
                "messaging.destination.subscription.name": subscription,
                "messaging.message.id": str(message.message_id()),
                "messaging.message.body.size": len(message.data()),
            },
        )
        span.end()
