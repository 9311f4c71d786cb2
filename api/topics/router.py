"""Routes of ``/admin/v2/persistent``: topics, partitions and subscriptions."""

from typing import Annotated

from fastapi import Body, Depends
from pydantic import StrictInt, StrictStr
from starlette.responses import Response

from api.deps import UowDep
from api.responses import JsonResponse, no_content
from api.routing import SluiceRoute, SluiceRouter
from api.topics import service
from api.topics.schemas import Lookup, PartitionedMetadata, PartitionedTopicStats, TopicStats
from models.json_body import INT32_MAX
from sluice.protocol.names import TopicName

router = SluiceRouter(prefix="/admin/v2/persistent", tags=["topics"], route_class=SluiceRoute)

TOPIC = "/{tenant}/{namespace}/{topic}"


async def topic_name(tenant: str, namespace: str, topic: str) -> TopicName:
    """The validated topic of the path (412 when invalid)."""
    return TopicName.parse(tenant, namespace, topic)


TopicDep = Annotated[TopicName, Depends(topic_name)]
# The count is a Java int in Pulsar: a larger number is a malformed body (400); the broker's
# maxNumPartitionsPerPartitionedTopic bound is checked by the service (406).
PartitionsBody = Annotated[
    StrictInt, Body(le=INT32_MAX, description="number of partitions (bare integer)")
]


# Lists of names may be long (a namespace of 50,000 topics): rendered at once, not validated
# again against their declared model.


@router.get("/{tenant}/{namespace}", response_model=list[str])
async def list_topics(tenant: str, namespace: str, uow: UowDep) -> Response:
    """Every topic of the namespace; partitions are listed one by one."""
    return JsonResponse(await service.list_topics(uow, tenant, namespace))


@router.get("/{tenant}/{namespace}/partitioned", response_model=list[str])
async def list_partitioned_topics(tenant: str, namespace: str, uow: UowDep) -> Response:
    """Base names of the partitioned topics of the namespace."""
    return JsonResponse(await service.list_partitioned(uow, tenant, namespace))


@router.put(TOPIC, status_code=204)
async def create_non_partitioned_topic(
    topic: TopicDep,
    uow: UowDep,
    properties: dict[StrictStr, StrictStr] | None = Body(None),
) -> Response:
    """Create a non-partitioned topic."""
    await service.create_non_partitioned_topic(uow, topic, properties or {})
    return no_content()


@router.delete(TOPIC, status_code=204)
async def delete_topic(topic: TopicDep, uow: UowDep, force: bool = False) -> Response:
    """Delete a non-partitioned topic with its subscriptions and policies."""
    await service.delete_topic(uow, topic, partitioned=False, force=force)
    return no_content()


@router.put(TOPIC + "/partitions", status_code=204)
async def create_partitioned_topic(
    topic: TopicDep, uow: UowDep, partitions: PartitionsBody
) -> Response:
    """Create a partitioned topic; the body is the partition count."""
    await service.create_partitioned_topic(uow, topic, partitions)
    return no_content()


@router.post(TOPIC + "/partitions", status_code=204)
async def update_partitioned_topic(
    topic: TopicDep, uow: UowDep, partitions: PartitionsBody
) -> Response:
    """Grow a partitioned topic to the given partition count."""
    await service.update_partitions(uow, topic, partitions)
    return no_content()


@router.get(TOPIC + "/partitions", response_model=PartitionedMetadata)
async def get_partitioned_metadata(topic: TopicDep, uow: UowDep) -> dict:
    """``{"partitions": N}``; 0 for a non-partitioned or unknown topic."""
    return {"partitions": await service.partition_count(uow, topic)}


@router.delete(TOPIC + "/partitions", status_code=204)
async def delete_partitioned_topic(topic: TopicDep, uow: UowDep, force: bool = False) -> Response:
    """Delete a partitioned topic, all its partitions, subscriptions and policies."""
    await service.delete_topic(uow, topic, partitioned=True, force=force)
    return no_content()


@router.get(TOPIC + "/subscriptions")
async def list_subscriptions(topic: TopicDep, uow: UowDep) -> list[str]:
    """Subscription names of the topic."""
    return await service.list_subscriptions(uow, topic)


@router.put(TOPIC + "/subscription/{subscription}", status_code=204)
async def create_subscription(topic: TopicDep, subscription: str, uow: UowDep) -> Response:
    """Create a subscription (on every partition of a partitioned topic)."""
    await service.create_subscription(uow, topic, subscription)
    return no_content()


@router.delete(TOPIC + "/subscription/{subscription}", status_code=204)
async def delete_subscription(
    topic: TopicDep, subscription: str, uow: UowDep, force: bool = False
) -> Response:
    """Delete a subscription."""
    await service.delete_subscription(uow, topic, subscription, force)
    return no_content()


# Stats documents come from the workers as they are: passed through, not re-serialized.


@router.get(TOPIC + "/stats", response_model=TopicStats)
async def get_stats(topic: TopicDep, uow: UowDep) -> Response:
    """Pulsar's ``TopicStats`` of a partition or non-partitioned topic; the totals over the
    partitions for a partitioned topic."""
    return JsonResponse(await service.topic_stats(uow, topic))


@router.get(TOPIC + "/partitioned-stats", response_model=PartitionedTopicStats)
async def get_partitioned_stats(
    topic: TopicDep, uow: UowDep, perPartition: bool = True
) -> Response:
    """Totals over a partitioned topic's partitions, and each partition's stats."""
    return JsonResponse(await service.partitioned_stats(uow, topic, perPartition))


@router.get(TOPIC + "/lookup", response_model=Lookup)
async def lookup_topic(topic: TopicDep, uow: UowDep) -> dict:
    """The worker that owns the topic (partition -> owner for a partitioned topic)."""
    return await service.lookup_topic(uow, topic)
