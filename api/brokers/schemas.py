"""Response documents of the broker routes."""

from __future__ import annotations

from api.schemas import Document


class ReadyChecks(Document):
    """Each dependency's state: ``ok`` or ``unavailable: <error>``."""

    database: str
    redis: str


class NotReady(ReadyChecks):
    """The checks, and what is down in Pulsar's error shape."""

    reason: str


class WorkerDocument(Document):
    """A live worker: how to reach it and how many partitions it owns."""

    id: str
    host: str
    httpUrl: str
    startedAt: int | None
    ownedPartitions: int
