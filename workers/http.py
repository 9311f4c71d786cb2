"""The worker's HTTP endpoint: liveness, readiness, Prometheus metrics, limits in force.

``/healthz`` answers while the event loop runs; ``/readyz`` once the worker has loaded its
policies and partitions; ``/metrics`` exports per-topic and per-subscription figures in the
Prometheus text format (names follow Pulsar's, with the ``sluice_`` prefix; written by
``workers.metrics``); ``/limits`` shows what every limiter of this worker enforces right now.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from models.resolution import PublishRate, ResolvedRate
from sluice.protocol.names import PARTITION_SUFFIX, TopicName
from workers.metrics import CONTENT_TYPE, render

if TYPE_CHECKING:
    from models.resource_groups import GroupBinding
    from workers.worker import Worker


def _group_of(worker: Worker) -> Callable[[str], GroupBinding | None]:
    """The resource group of a partition, by full name, as the policy snapshot has it now:
    resolved once per topic for the scrape (every partition of a topic has its group)."""
    groups = worker.policy.groups
    by_topic: dict[str, GroupBinding | None] = {}

    def group_of(partition: str) -> GroupBinding | None:
        base, sep, index = partition.rpartition(PARTITION_SUFFIX)
        topic = base if sep and index.isdigit() else partition
        if topic not in by_topic:
            by_topic[topic] = groups.binding_for(TopicName.from_full(partition))
        return by_topic[topic]

    return group_of


def create_http_app(worker: Worker) -> Starlette:
    """The Starlette app serving /healthz, /readyz and /metrics."""

    async def healthz(_request) -> Response:
        return PlainTextResponse("ok")

    async def readyz(_request) -> Response:
        if worker.ready:
            return PlainTextResponse("ready")
        return PlainTextResponse("starting", status_code=503)

    async def metrics(_request) -> Response:
        # Written on a thread: tens of thousands of samples, while the loop dispatches.
        dormancy = worker.dormancy
        owned = len(worker.runners) + len(dormancy)
        body = await asyncio.to_thread(
            render,
            worker.stats.docs,
            owned,
            len(dormancy),
            dormancy.woken,
            _group_of(worker) if worker.policy.groups.groups else None,
        )
        return Response(body, media_type=CONTENT_TYPE)

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
