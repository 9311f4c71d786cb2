"""The worker's HTTP endpoint: liveness, readiness, Prometheus metrics, limits in force.

``/healthz`` answers while the event loop runs; ``/readyz`` once the worker has loaded its
policies and partitions; ``/metrics`` exports per-topic and per-subscription figures in the
Prometheus text format (names follow Pulsar's, with the ``sluice_`` prefix); ``/limits``
shows what every limiter of this worker enforces right now.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from starlette.applications import Starlette
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from models.resolution import PublishRate, ResolvedRate
from sluice.protocol.names import TopicName

if TYPE_CHECKING:
    from workers.worker import Worker

REASONS = (("broker", "Broker"), ("topic", "Topic"), ("subscription", "Subscription"))


class WorkerCollector:
    """Reads the worker's latest stats documents at scrape time."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker

    def collect(self):
        """Yield every metric family."""
        labels_t = ["topic"]
        labels_s = ["topic", "subscription"]
        rate_in = GaugeMetricFamily(
            "sluice_topic_msg_rate_in", "Messages/s published", labels=labels_t
        )
        msg_in = CounterMetricFamily("sluice_topic_msg_in", "Messages published", labels=labels_t)
        bytes_in = CounterMetricFamily("sluice_topic_bytes_in", "Bytes published", labels=labels_t)
        rate_out = GaugeMetricFamily(
            "sluice_subscription_msg_rate_out", "Messages/s dispatched", labels=labels_s
        )
        msg_out = CounterMetricFamily(
            "sluice_subscription_msg_out", "Messages dispatched", labels=labels_s
        )
        bytes_out = CounterMetricFamily(
            "sluice_subscription_bytes_out", "Bytes dispatched", labels=labels_s
        )
        backlog = GaugeMetricFamily(
            "sluice_subscription_back_log", "Backlog (entries)", labels=labels_s
        )
        unacked = GaugeMetricFamily(
            "sluice_subscription_unacked_messages", "Unacknowledged entries", labels=labels_s
        )
        consumers = GaugeMetricFamily(
            "sluice_subscription_consumers_count", "Connected consumers", labels=labels_s
        )
        throttled_msg = CounterMetricFamily(
            "sluice_subscription_dispatch_throttled_msg_events",
            "Dispatches cut short by a message limit",
            labels=[*labels_s, "reason"],
        )
        throttled_bytes = CounterMetricFamily(
            "sluice_subscription_dispatch_throttled_bytes_events",
            "Dispatches cut short by a byte limit",
            labels=[*labels_s, "reason"],
        )
        for topic, doc in list(self.worker.stats.docs.items()):
            rate_in.add_metric([topic], doc["msgRateIn"])
            msg_in.add_metric([topic], doc["msgInCounter"])
            bytes_in.add_metric([topic], doc["bytesInCounter"])
            for name, sub in doc["subscriptions"].items():
                key = [topic, name]
                rate_out.add_metric(key, sub["msgRateOut"])
                msg_out.add_metric(key, sub["msgOutCounter"])
                bytes_out.add_metric(key, sub["bytesOutCounter"])
                backlog.add_metric(key, sub["msgBacklog"])
                unacked.add_metric(key, sub["unackedMessages"])
                consumers.add_metric(key, len(sub["consumers"]))
                for reason, label in REASONS:
                    throttled_msg.add_metric(
                        [*key, reason], sub[f"dispatchThrottledMsgEventsBy{label}Limit"]
                    )
                    throttled_bytes.add_metric(
                        [*key, reason], sub[f"dispatchThrottledBytesEventsBy{label}Limit"]
                    )
        owned = GaugeMetricFamily("sluice_worker_owned_partitions", "Partitions this worker owns")
        owned.add_metric([], len(self.worker.runners) + len(self.worker.dormancy))
        dormant = GaugeMetricFamily(
            "sluice_worker_dormant_partitions",
            "Owned partitions that are quiet: no runner, woken by clients' events",
        )
        dormant.add_metric([], len(self.worker.dormancy))
        woken = CounterMetricFamily(
            "sluice_worker_partition_wakeups", "Dormant partitions woken (events, timers)"
        )
        woken.add_metric([], self.worker.dormancy.woken)
        yield from (
            rate_in,
            msg_in,
            bytes_in,
            rate_out,
            msg_out,
            bytes_out,
            backlog,
            unacked,
            consumers,
            throttled_msg,
            throttled_bytes,
            owned,
            dormant,
            woken,
        )


def create_http_app(worker: Worker) -> Starlette:
    """The Starlette app serving /healthz, /readyz and /metrics."""
    registry = CollectorRegistry()
    registry.register(WorkerCollector(worker))

    async def healthz(_request) -> Response:
        return PlainTextResponse("ok")

    async def readyz(_request) -> Response:
        if worker.ready:
            return PlainTextResponse("ready")
        return PlainTextResponse("starting", status_code=503)

    async def metrics(_request) -> Response:
        return Response(generate_latest(registry), media_type="text/plain; version=0.0.4")

    async def limits(request) -> Response:
        wanted = request.query_params.get("topic")
        partitions = {}
        for name, runner in worker.runners.items():
            if wanted and not name.startswith(wanted):
                continue
            partitions[name] = {
                "topic": _rate_json(runner.topic_rate),
                "subscriptions": {sub: _rate_json(d.rate) for sub, d in runner.dispatchers.items()},
            }
        # A dormant partition has no limiter until it wakes: what it would enforce now.
        for name in sorted(worker.dormancy.partitions):
            if wanted and not name.startswith(wanted):
                continue
            partition = TopicName.from_full(name)
            topic = worker.policy.for_partition(partition).resolve(None, PublishRate()).topic
            partitions[name] = {"topic": _rate_json(topic), "subscriptions": {}, "dormant": True}
        body = {
            "worker": worker.id,
            "policyVersion": worker.policy.version,
            "broker": _limiter_json(worker.broker_limiter),
            "partitions": partitions,
        }
        return JSONResponse(body)

    return Starlette(
        routes=[
            Route("/healthz", healthz),
            Route("/readyz", readyz),
            Route("/metrics", metrics),
            Route("/limits", limits),
        ]
    )


def _rate_json(rate: ResolvedRate | None) -> dict:
    """A TOPIC or SUBSCRIPTION limit in force (its quota is kept in Redis)."""
    if rate is None:
        return {"permitsPerPeriodInMsg": -1, "permitsPerPeriodInByte": -1, "periodInSecond": 1}
    return {
        "permitsPerPeriodInMsg": rate.permits_msg,
        "permitsPerPeriodInByte": rate.permits_byte,
        "periodInSecond": rate.period,
        "source": rate.source.value,
    }


def _limiter_json(limiter) -> dict:
    return {
        "permitsPerPeriodInMsg": limiter.msg.permits,
        "permitsPerPeriodInByte": limiter.byte.permits,
        "periodInSecond": limiter.msg.period,
        "availableMsg": limiter.msg.available if limiter.msg.limited else None,
        "availableByte": limiter.byte.available if limiter.byte.limited else None,
        "source": limiter.resolved.source.value if limiter.resolved else None,
    }
