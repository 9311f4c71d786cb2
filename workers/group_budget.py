"""A dispatcher's side of its resource group's limiter (``group_budget.lua``).

The group's limiter lives in Redis, in the group's own slot, so that one budget holds for
every partition, subscription and worker attached, also on a Redis Cluster.  A dispatcher of a
partition in a group reserves on it before each dispatch call (the grant caps the call's
budget, with the BROKER reservation) and settles afterwards with what the call handed out.
When the next step follows at once (the call stopped at a read cap or at the budget) the
settlement rides on the next reservation, so a busy dispatcher pays one extra script call per
dispatch call; otherwise it is sent on its own.  Partitions in no group pay nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from models.resource_groups import GroupBinding
from sluice.protocol.scripts import GROUP_BUDGET
from workers.scriptcall import Packed, PackedScript

PERIOD_MS = 1000  # group rates are per second, as Pulsar's
WHY_GRANTED, WHY_GROUP, WHY_SHARE = 0, 1, 2


@dataclass(frozen=True, slots=True)
class Grant:
    """What one reservation gave: messages and bytes (-1 = unlimited in that dimension), the
    periods they were taken from, and when nothing was granted, why and how long to wait."""

    messages: int
    bytes: int
    msg_period: int
    byte_period: int
    wait_ms: int
    why: int

    @property
    def granted(self) -> bool:
        """True when the call may go ahead."""
        return self.why == WHY_GRANTED

    @classmethod
    def from_reply(cls, reply: list) -> Grant:
        return cls(*(int(value) for value in reply))


@dataclass(frozen=True, slots=True)
class Settlement:
    """A reservation to settle: what was reserved, from which periods, and what went out."""

    grant: Grant
    messages: int
    bytes: int


class GroupBudget:
    """Calls of one group's limiter for one dispatcher (one member of the group)."""

    def __init__(self, script: PackedScript, binding: GroupBinding) -> None:
        self.script = script
        self.binding = binding
        self._keys: Packed = script.prefix(GROUP_BUDGET.keys(group=binding.group))
        self.pending: Settlement | None = None  # to ride on the next reservation

    def _head(self, messages: int, size: int, hungry: bool) -> list:
        rates = self.binding.rates
        return [
            self.binding.member_id,
            self.binding.weight,
            rates.dispatch_msgs,
            rates.dispatch_bytes,
            PERIOD_MS,
            messages,
            size,
            1 if hungry else 0,
            "",
        ]

    @staticmethod
    def _settle_args(settlement: Settlement | None) -> list:
        if settlement is None:
            return []
        grant = settlement.grant
        return [
            grant.msg_period,
            max(grant.messages, 0),
            settlement.messages if grant.messages >= 0 else 0,
            grant.byte_period,
            max(grant.bytes, 0),
            settlement.bytes if grant.bytes >= 0 else 0,
        ]

    async def reserve(self, messages: int, size: int) -> Grant:
        """Reserve up to ``messages`` and ``size`` bytes (settling what is pending)."""
        pending, self.pending = self.pending, None
        argv = self._head(messages, size, True) + self._settle_args(pending)
        return Grant.from_reply(await self.script.call(self._keys, argv))

    async def settle(self, grant: Grant, messages: int, size: int, hungry: bool) -> None:
        """Settle a reservation now (``hungry``: the member still has more to send)."""
        argv = self._head(0, 0, hungry) + self._settle_args(Settlement(grant, messages, size))
        await self.script.call(self._keys, argv)
