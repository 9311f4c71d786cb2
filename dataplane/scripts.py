"""The data plane's Lua scripts, registered once per Redis client.

``register_scripts`` returns every script of ``sluice.protocol.frames.SCRIPT_NAMES`` by name, as
redis-py ``AsyncScript`` objects: they load themselves again after a server restart, and a
call may go through another client's pipeline (``client=``).
"""

from __future__ import annotations

from collections.abc import Mapping

from redis.asyncio import Redis
from redis.commands.core import AsyncScript

from sluice.protocol.frames import SCRIPT_NAMES, script_source

Scripts = Mapping[str, AsyncScript]


def register_scripts(redis: Redis) -> dict[str, AsyncScript]:
    """Every data-plane script, registered on ``redis``, by name."""
    return {name: redis.register_script(script_source(name)) for name in SCRIPT_NAMES}
