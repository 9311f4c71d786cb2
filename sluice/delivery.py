"""Delayed delivery on the client side: ``deliver_at`` and ``deliver_after`` of a send.

As in pulsar-client, ``deliver_at`` is a time in milliseconds since the epoch and
``deliver_after`` a ``datetime.timedelta`` counted from the send; when both are given,
``deliver_after`` wins (pulsar-client sets the deliver-at time from each in turn).  The time is
the producer's clock, written into the entry's ``a`` field; ``dispatch.lua`` holds the entry
back on Shared and Key_Shared subscriptions until then.  Exclusive and Failover subscriptions
deliver it at once, as Pulsar does.  A delayed message is never batched.
"""

from __future__ import annotations

import time
from datetime import timedelta

from sluice.errors import InvalidConfiguration


def delivery_time(deliver_at: object, deliver_after: object) -> int | None:
    """The deliver-at time in ms since the epoch, or None to deliver at once."""
    at: int | None = None
    if deliver_at is not None:
        if isinstance(deliver_at, bool) or not isinstance(deliver_at, int):
            raise InvalidConfiguration("deliver_at must be an int: milliseconds since the epoch")
        at = deliver_at
    if deliver_after is not None:
        if not isinstance(deliver_after, timedelta):
            raise InvalidConfiguration("deliver_after must be a datetime.timedelta")
        at = int(time.time() * 1000) + int(deliver_after / timedelta(milliseconds=1))
    return at
