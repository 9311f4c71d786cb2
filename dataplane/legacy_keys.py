"""Renames the cluster-wide keys of a data plane written before they shared the ``{meta}`` tag.

Sluice used to name its cluster-wide keys ``sl:meta:topics``, ``sl:workers`` and so on; they
are now ``sl:{meta}:topics``, ``sl:{meta}:workers``, ... (``sluice.protocol.keys.LEGACY``), so
that a Redis Cluster keeps them in one slot.  The admin service and every worker call
``migrate_legacy_keys`` on start: on a single server each old key that still exists is renamed
(``RENAMENX``: a new key already written wins, and the old one is then left alone).  A Redis
Cluster never held the old names (Sluice did not run on one before), so nothing is done there.

The keys of a topic partition likewise moved from the tag ``{tenant/ns/topic-partition-N}``
to ``{tenant/ns/topic-partition-N~K}`` (``sluice.protocol.keys.tag``: partitions spread over
the slot space).  ``migrate_partition_keys`` renames them on a single server in one ``SCAN``
of the key space, once: ``sl:{meta}:layout`` records that it was done.
"""

from __future__ import annotations

import logging

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from sluice.protocol import keys
from sluice.protocol.connection import is_cluster
from sluice.protocol.names import TopicName

LAYOUT = keys.META + "layout"
LAYOUT_VERSION = b"2"  # partition tags with the spreading suffix

log = logging.getLogger(__name__)


async def migrate_legacy_keys(redis: Redis) -> list[str]:
    """Rename the old cluster-wide keys that exist, then the partition keys under their old
    tags; the old cluster-wide names renamed."""
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
    await migrate_partition_keys(redis)
    return renamed


async def migrate_partition_keys(redis: Redis) -> int:
    """Rename partition keys still under their old tag (single server, once); how many."""
    if is_cluster(redis) or await redis.get(LAYOUT) == LAYOUT_VERSION:
        return 0
    renamed = 0
    async for raw in redis.scan_iter(match="sl:{*", count=1000):
        key = raw.decode() if isinstance(raw, bytes) else raw
        body, sep, rest = key[len("sl:{") :].partition("}")
        if not sep or "~" in body or body.count("/") < 2:
            continue
        tenant, namespace, local = body.split("/", 2)
        partition = TopicName(tenant, namespace, local)
        if partition.partition_index < 0:
            continue
        if await redis.renamenx(key, f"sl:{keys.tag(partition)}{rest}"):
            renamed += 1
    await redis.set(LAYOUT, LAYOUT_VERSION)
    if renamed:
        log.info("moved %d partition keys to their spread tags", renamed)
    return renamed
