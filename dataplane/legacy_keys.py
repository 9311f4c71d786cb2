"""Renames the cluster-wide keys of a data plane written before they shared the ``{meta}`` tag.

Sluice used to name its cluster-wide keys ``sl:meta:topics``, ``sl:workers`` and so on; they
are now ``sl:{meta}:topics``, ``sl:{meta}:workers``, ... (``sluice.protocol.keys.LEGACY``), so
that a Redis Cluster keeps them in one slot.  The admin service and every worker call
``migrate_legacy_keys`` on start: on a single server each old key that still exists is renamed
(``RENAMENX``: a new key already written wins, and the old one is then left alone).  A Redis
Cluster never held the old names (Sluice did not run on one before), so nothing is done there.
"""

from __future__ import annotations

import logging

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from sluice.protocol import keys
from sluice.protocol.connection import is_cluster

log = logging.getLogger(__name__)


async def migrate_legacy_keys(redis: Redis) -> list[str]:
    """Rename the old cluster-wide keys that exist; the old names renamed."""
    if is_cluster(redis):
        return []
    renamed = []
    for old, new in keys.LEGACY.items():
        try:
            if await redis.renamenx(old, new):
                renamed.append(old)
        except ResponseError:  # "no such key": nothing to migrate
            continue
    if renamed:
        log.info("renamed cluster-wide keys to their {meta} names: %s", ", ".join(renamed))
    return renamed
