"""Bodies of ``/admin/v2/dataplane``."""

from __future__ import annotations

from pydantic import BaseModel, Field


class SessionDocument(BaseModel):
    """Where and as whom a client talks to Redis."""

    serviceUrl: str = Field(description="the Redis URL, without credentials")
    username: str | None = Field(None, description="the session's Redis user (None: no ACLs)")
    password: str | None = Field(
        None, description="the session's password; only in the answer that created it"
    )
    role: str | None = Field(None, description="the token's role")
    expiresAt: int | None = Field(None, description="end of the session, ms since the epoch")
    renewAfterSeconds: float | None = Field(None, description="when the client should renew")


class PartitionsDocument(BaseModel):
    """A topic's partition count, as Pulsar's partitioned-topic metadata."""

    partitions: int = Field(description="0 for a non-partitioned topic")
