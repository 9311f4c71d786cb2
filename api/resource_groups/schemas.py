"""Response documents of the resource-group routes: Pulsar's ``ResourceGroup`` and Sluice's
list of a group's members."""

from __future__ import annotations

from api.schemas import Document


class ResourceGroupDocument(Document):
    """Pulsar's ``ResourceGroup``: rates per second, -1 = unlimited."""

    publishRateInMsgs: int
    publishRateInBytes: int
    dispatchRateInMsgs: int
    dispatchRateInBytes: int
    replicationDispatchRateInMsgs: int
    replicationDispatchRateInBytes: int


class MemberDocument(Document):
    """A tenant, namespace or topic attached to a group, and its weight in the fair split."""

    level: str
    name: str
    weight: int
