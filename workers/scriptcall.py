"""A lean EVALSHA for the dispatch hot path: keys packed once, one round trip per call.

redis-py's ``Script`` call packs every argument, wraps the call in its retry and telemetry
machinery and looks up response callbacks; for a call made thousands of times a second with
the same twelve keys that costs more than the round trip.  ``PackedScript`` packs a key set
once (``prefix``) and per call only the arguments, sends them on a pooled connection and
reads the reply.  A script missing from the server's cache (after a restart) is loaded and
the call repeated; any other failure drops the connection and raises the ``RedisError`` the
caller handles.  Error replies (``FENCED``) come back as ``ResponseError`` as usual.
"""

from __future__ import annotations

import hashlib

from redis.asyncio import Redis
from redis.exceptions import NoScriptError, ResponseError


def _bulk(value: bytes) -> bytes:
    return b"$%d\r\n%b\r\n" % (len(value), value)


def _encode(value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return str(value).encode()


class PackedScript:
    """One Lua script, called with pre-packed keys."""

    def __init__(self, redis: Redis, source: str) -> None:
        self.redis = redis
        self.source = source
        self.sha = hashlib.sha1(source.encode()).hexdigest()

    def prefix(self, keys: list[str]) -> tuple[int, bytes]:
        """The packed ``EVALSHA sha numkeys keys...`` of a key set, and its word count."""
        words = [b"EVALSHA", self.sha.encode(), str(len(keys)).encode(), *map(_encode, keys)]
        return len(words), b"".join(_bulk(w) for w in words)

    async def __call__(self, prefix: tuple[int, bytes], args: list) -> object:
        """Run the script with a packed key set and these arguments; the parsed reply."""
        words, packed_keys = prefix
        packed = b"*%d\r\n%b%b" % (
            words + len(args),
            packed_keys,
            b"".join(_bulk(_encode(a)) for a in args),
        )
        try:
            return await self._send(packed)
        except NoScriptError:
            await self.redis.script_load(self.source)
            return await self._send(packed)

    async def _send(self, packed: bytes) -> object:
        pool = self.redis.connection_pool
        connection = await pool.get_connection()
        try:
            await connection.send_packed_command(packed, check_health=False)
            return await connection.read_response()
        except ResponseError:
            raise  # a whole error reply was read: the connection is fine
        except BaseException:
            await connection.disconnect()
            raise
        finally:
            await pool.release(connection)
