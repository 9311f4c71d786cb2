"""Durable acknowledgements: a topic or namespace asks its producers to wait for replicas (a
Sluice extension; Pulsar acknowledges once a quorum of bookies has an entry, Redis replicates
asynchronously).

Stored as the topic's or namespace's ``durableAcks`` policy (the topic's wins; with neither,
the broker settings ``durableAckReplicas`` and ``durableAckTimeoutMs`` apply), JSON::

    {"replicas": 1, "timeoutMs": 1000}

A send to a partition of the namespace is acknowledged only once ``replicas`` replicas of the
partition's Redis master confirm the write (``WAIT``, or ``WAITAOF`` where the server has it);
when they do not within ``timeoutMs`` the send fails (``Timeout``), it is never reported as
stored.  ``replicas`` 0 asks for nothing: an acknowledgement means what it means without the
policy (docs/faults.md, "What an acknowledgement promises").  A missing ``timeoutMs`` is 1000;
types are strict and out-of-range values are 400.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from models.dispatch_rate import parse_body

# The stored policy kind (the ``kind`` column of ``flow_policies``) and its path segment.
DURABLE_ACKS = "durableAcks"
REPLICAS = "replicas"
TIMEOUT_MS = "timeoutMs"
DEFAULT_TIMEOUT_MS = 1000
# The broker settings that give a topic without the policy its default (models.broker_config).
BROKER_DURABLE_REPLICAS = "durableAckReplicas"
BROKER_DURABLE_TIMEOUT = "durableAckTimeoutMs"
MAX_REPLICAS = 100
MAX_TIMEOUT_MS = 600_000


class DurableAcks(BaseModel):
    """How many replicas must confirm a send, and how long a send waits for them."""

    model_config = ConfigDict(frozen=True, strict=True, extra="forbid")

    replicas: int = Field(0, ge=0, le=MAX_REPLICAS, description="replicas that must confirm")
    timeoutMs: int = Field(
        DEFAULT_TIMEOUT_MS, ge=1, le=MAX_TIMEOUT_MS, description="ms a send waits for them"
    )

    @property
    def enabled(self) -> bool:
        """True when a send must wait for at least one replica."""
        return self.replicas > 0

    def to_json(self) -> dict[str, Any]:
        """The stored and answered JSON."""
        return {REPLICAS: self.replicas, TIMEOUT_MS: self.timeoutMs}

    @classmethod
    def from_json(cls, body: object) -> DurableAcks:
        """Parse a decoded JSON body; ``InvalidInput`` (400) with a readable reason."""
        return parse_body(cls, body, "DurableAcks", (REPLICAS, TIMEOUT_MS), drop_nulls=True)


NO_DURABLE_ACKS = DurableAcks()  # the lowest level: acknowledged once the master has it
