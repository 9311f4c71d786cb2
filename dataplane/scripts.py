"""The data plane's Lua scripts, registered once per Redis client.

``register_scripts`` returns every script of the registry (``sluice.protocol.scripts``) by name, as
redis-py ``AsyncScript`` objects: they load themselves again after a server restart, and a
call may go through another client's pipeline (``client=``).
"""

from __future__ import annotations

from collections.abc import Mapping

from redis.asyncio import Redis
from redis.commands.core import AsyncScript

from sluice.protocol.connection import is_cluster
from sluice.protocol.scripts import SCRIPTS

Scripts = Mapping[str, AsyncScript]


def register_scripts(redis: Redis) -> dict[str, AsyncScript]:
    """Every data-plane script, registered on ``redis``, by name."""
    return {name: redis.register_script(spec.source) for name, spec in SCRIPTS.items()}


async def ensure_loaded(redis: Redis) -> int:
    """On a Redis Cluster, load every data-plane script some master lacks; the number loaded.

    Scripts called through a pipeline are not loaded by redis-py when the node lacks them, and
    a replica that a failover promoted starts with an empty script cache: the workers call
    this on every ownership cycle so that such pipelines fail at most until the next one.  On
    a single server it does nothing (redis-py's pipelines load scripts themselves)."""
    if not is_cluster(redis):
        return 0
    return await load_missing(redis)


async def load_missing(redis: Redis) -> int:
    """Load every data-plane script the server (every master of a cluster) lacks, whoever
    will call it: one ``SCRIPT EXISTS``, then a ``SCRIPT LOAD`` per missing script."""
    specs = list(SCRIPTS.values())
    present = await redis.script_exists(*(spec.sha for spec in specs))
    missing = [spec for spec, ok in zip(specs, present, strict=True) if not ok]
    for spec in missing:
        await redis.script_load(spec.source)
    return len(missing)
