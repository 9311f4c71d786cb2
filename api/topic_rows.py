"""The database rows of the one topic an admin call names, including a topic a client has
only just created.

A client creates a topic on first use in the data plane's registry (``keys.TOPICS``); a
worker records it in the database moments later.  An admin call that names such a topic in
between waits for that record (at most ``ADOPTION_SECONDS``) instead of answering 404: in
Pulsar the broker has created the topic before the producer's or consumer's call returns,
so a peek or a stats read right after it finds the topic.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from api.unit_of_work import UnitOfWork
from models import repository
from models.errors import NotFound
from models.orm import Namespace, Topic
from sluice.protocol import keys
from sluice.protocol.connection import REDIS_FAULTS
from sluice.protocol.names import TopicName

ADOPTION_SECONDS = 3.0
POLL_SECONDS = 0.05
T = TypeVar("T")  # what a lookup returns


async def get_topic(uow: UnitOfWork, topic: TopicName) -> tuple[Namespace, Topic]:
    """The namespace and topic rows of a topic or one of its partitions, waiting for a topic
    that clients created and no worker has recorded yet; 404 otherwise."""
    return await _adopted(uow, topic, repository.get_topic)


async def get_topic_row(uow: UnitOfWork, topic: TopicName) -> tuple[int, Any]:
    """As ``get_topic``, the namespace's id and a plain row (``repository.get_topic_row``),
    for a path that only reads them."""
    return await _adopted(uow, topic, repository.get_topic_row)


async def _adopted(
    uow: UnitOfWork, topic: TopicName, lookup: Callable[[Any, TopicName], Awaitable[T]]
) -> T:
    """``lookup(session, topic)``, waiting for a topic that clients created and no worker
    has recorded yet."""
    try:
        return await lookup(uow.session, topic)
    except NotFound:
        if not await _registered(uow, topic):
            raise
    deadline = time.monotonic() + ADOPTION_SECONDS
    while True:
        await asyncio.sleep(POLL_SECONDS)
        try:
            return await lookup(uow.session, topic)
        except NotFound:
            if time.monotonic() >= deadline:
                raise


async def _registered(uow: UnitOfWork, topic: TopicName) -> bool:
    """Whether the data plane's registry holds the topic (or its partitioned base)."""
    if uow.data_plane is None:
        return False
    try:
        return bool(await uow.data_plane.redis.hexists(keys.TOPICS, topic.base.full))
    except REDIS_FAULTS:
        return False
