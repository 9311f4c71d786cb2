"""OpenTelemetry spans of the worker's dispatches (optional, off by default).

``SLUICE_WORKER_TRACING=true`` turns them on with the process's global ``TracerProvider``:
the one the OpenTelemetry SDK's auto-configuration sets up (``opentelemetry-instrument sluice
worker``, with the exporter and endpoint in the usual ``OTEL_*`` variables), or none at all
(a no-op) when nothing configures it.  It needs ``opentelemetry-api``
(``pip install 'sluice-client[tracing]'``).  Off, a dispatch tests one attribute.

On, every ``dispatch.lua`` call that handed out entries, or was held back by a limit, is a
span ``dispatch <partition>`` (kind INTERNAL) from the call to its answer, with the messaging
semantic conventions the client's spans use (``messaging.system`` ``sluice``,
``messaging.operation.type`` ``send``: the worker hands the messages to the consumers'
receiver queues; ``messaging.operation.name`` ``dispatch``, ``messaging.destination.name``,
``messaging.destination.subscription.name``, ``messaging.batch.message_count``) and Sluice's
own: entries, bytes, redeliveries and, when a limit stopped the call, ``sluice.throttled``.
The span is not a child of the messages' send spans: one call carries many messages of many
traces, and the worker does not read their properties (the client's receive span is the send
span's child).
"""

from __future__ import annotations

from sluice.protocol.frames import DispatchReason, DispatchResult
from sluice.tracing import SYSTEM, opentelemetry_trace

WHAT = "SLUICE_WORKER_TRACING"
THROTTLED = {DispatchReason.MSG_BUDGET: "messages", DispatchReason.BYTE_BUDGET: "bytes"}


class DispatchTracer:
    """Makes the dispatch spans of one worker."""

    def __init__(self, provider: object) -> None:
        self._kind = opentelemetry_trace(WHAT).SpanKind.INTERNAL
        self._tracer = provider.get_tracer("sluice.worker")  # type: ignore[attr-defined]

    @classmethod
    def global_provider(cls) -> DispatchTracer:
        """Spans through the process's global ``TracerProvider``."""
        return cls(opentelemetry_trace(WHAT).get_tracer_provider())

    def dispatched(
        self, partition: str, subscription: str, started_ns: int, result: DispatchResult
    ) -> None:
        """One call's span, from ``started_ns`` (``time.time_ns()`` before it) to now."""
        throttled = THROTTLED.get(result.reason)
        if not result.entries and throttled is None:
            return  # found nothing to do: no span
        attributes: dict[str, str | int] = {
            "messaging.system": SYSTEM,
            "messaging.operation.type": "send",
            "messaging.operation.name": "dispatch",
            "messaging.destination.name": partition,
            "messaging.destination.subscription.name": subscription,
            "messaging.batch.message_count": result.messages,
            "sluice.dispatch.entries": result.entries,
            "sluice.dispatch.bytes": result.bytes,
            "sluice.dispatch.redelivered": result.redelivered,
        }
        if throttled is not None:
            attributes["sluice.throttled"] = throttled
        span = self._tracer.start_span(
            f"dispatch {partition}", kind=self._kind, start_time=started_ns, attributes=attributes
        )
        span.end()
