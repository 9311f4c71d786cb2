"""Data-plane sessions: short-lived Redis ACL users that carry a role's grants.

A client presents its token to the admin service once; ``Sessions.issue`` makes a Redis user
``sl-session-<random>`` with a random password and the rules ``dataplane.acl.session_rules``
builds from the role's grants, and records it in ``sl:{meta}:sessions`` (hash: user -> JSON
role, expiry in ms, SHA-256 of the password; the password itself is kept nowhere).  The
session lives ``ttl`` seconds, never past the token's own expiry; the client renews it with
its token before then (``renew``).

``reconcile`` runs every second in every admin service: it deletes the users of expired
sessions (Redis then closes their connections), re-creates users a Redis restart lost (from the
stored password digest), deletes session users no record names, and applies the current grants
to every live session, so a revoked grant stops working on live connections within about a
second (at once when the revoking request went through this service: ``refresh_role``).
On a Redis Cluster every ACL command goes to every node.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import orjson
from redis.asyncio import Redis
from redis.exceptions import RedisError

from dataplane.acl import SESSION_USER_PREFIX, Scope, session_rules
from dataplane.scripts import load_missing
from sluice.protocol import keys
from sluice.protocol.connection import is_cluster

log = logging.getLogger(__name__)

REGISTRY = keys.META + "sessions"
Grants = list[tuple[Scope, frozenset[str]]]
# Role names -> their grants, read from the database at the time of the call.
GrantSource = Callable[[Iterable[str]], Awaitable[Mapping[str, Grants]]]


@dataclass(frozen=True)
class Issued:
    """A session as the client receives it (``password`` only when it was just made)."""

    user: str
    password: str | None
    role: str
    expires_ms: int


def _digest(password: str) -> str:
    return hashlib.sha256(password.encode()).hexdigest()


class SessionNotFound(Exception):
    """No live session of that name for that role."""


class Sessions:
    """Issues, renews, revokes and reconciles session users on one Redis (or cluster)."""

    def __init__(
        self,
        redis: Redis,
        grants: GrantSource,
        ttl_seconds: float = 300.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.redis = redis
        self.grants = grants
        self.ttl = ttl_seconds
        self.clock = clock
        self._applied: dict[str, list[str]] = {}
        self._lock = asyncio.Lock()

    # --- ACL commands (every node of a cluster) ---------------------------------------------

    async def _acl(self, *args: Any) -> list[Any]:
        if is_cluster(self.redis):
            nodes = self.redis.get_nodes()  # type: ignore[attr-defined]
            return [await self.redis.execute_command(*args, target_nodes=n) for n in nodes]
        return [await self.redis.execute_command(*args)]

    async def _set_user(self, user: str, rules: list[str]) -> None:
        await self._acl("ACL", "SETUSER", user, *rules)
        self._applied[user] = rules

    async def _delete_users(self, users: list[str]) -> None:
        if users:
            await self._acl("ACL", "DELUSER", *users)
        for user in users:
            self._applied.pop(user, None)

    # --- sessions ---------------------------------------------------------------------------

    def _expiry_ms(self, token_expires: float | None) -> int:
        expires = self.clock() + self.ttl
        if token_expires is not None:
            expires = min(expires, token_expires)
        return int(expires * 1000)

    async def issue(self, role: str, token_expires: float | None) -> Issued:
        """A new session for ``role``: its user exists with the role's grants on return."""
        user = SESSION_USER_PREFIX + secrets.token_hex(12)
        password = secrets.token_urlsafe(32)
        digest = _digest(password)
        expires = self._expiry_ms(token_expires)
        grants = (await self.grants([role])).get(role, [])
        record = orjson.dumps({"role": role, "expires": expires, "hash": digest})
        async with self._lock:
            await self.redis.hset(REGISTRY, user, record)
            try:
                await self._set_user(user, session_rules(digest, grants))
            except RedisError:
                await self.redis.hdel(REGISTRY, user)
                raise
        await load_missing(self.redis)  # session users may call the scripts, not load them
        return Issued(user, password, role, expires)

    async def renew(self, user: str, role: str, token_expires: float | None) -> Issued:
        """Extend a live session of ``role``; ``SessionNotFound`` when there is none."""
        raw = await self.redis.hget(REGISTRY, user)
        if raw is None:
            raise SessionNotFound(user)
        record = orjson.loads(raw)
        if record["role"] != role or record["expires"] <= self.clock() * 1000:
            raise SessionNotFound(user)
        record["expires"] = max(record["expires"], self._expiry_ms(token_expires))
        await self.redis.hset(REGISTRY, user, orjson.dumps(record))
        await load_missing(self.redis)
        return Issued(user, None, role, record["expires"])

    async def close(self, user: str, role: str) -> bool:
        """End a session of ``role`` now (its connections are closed); False when unknown."""
        raw = await self.redis.hget(REGISTRY, user)
        if raw is None or orjson.loads(raw)["role"] != role:
            return False
        async with self._lock:
            await self.redis.hdel(REGISTRY, user)
            await self._delete_users([user])
        return True

    async def refresh_role(self, role: str) -> None:
        """Apply ``role``'s current grants to its live sessions now."""
        await self.reconcile(only_role=role)

    async def reconcile(self, only_role: str | None = None) -> None:
        """Reap expired sessions, restore lost users, drop strays, apply current grants."""
        async with self._lock:
            stored = cast(dict[bytes, bytes], await self.redis.hgetall(REGISTRY))
            registry = {k.decode(): orjson.loads(v) for k, v in stored.items()}
            now_ms = self.clock() * 1000
            expired = [u for u, r in registry.items() if r["expires"] <= now_ms]
            if expired:
                await self.redis.hdel(REGISTRY, *expired)
                await self._delete_users(expired)
                for user in expired:
                    registry.pop(user)
            if only_role is not None:
                registry = {u: r for u, r in registry.items() if r["role"] == only_role}
            else:
                # On a cluster, a user counts as present only when every node has it (a node
                # added or restarted since gets it again); a stray on any node is removed.
                per_node = [
                    {u.decode() if isinstance(u, bytes) else u for u in users}
                    for users in await self._acl("ACL", "USERS")
                ]
                present = set.intersection(*per_node) if per_node else set()
                anywhere = set.union(*per_node) if per_node else set()
                strays = sorted(
                    u for u in anywhere if u.startswith(SESSION_USER_PREFIX) and u not in registry
                )
                await self._delete_users(strays)
                for user in registry:
                    if user not in present:
                        self._applied.pop(user, None)
            if not registry:
                return
            grants = await self.grants({r["role"] for r in registry.values()})
            for user, record in registry.items():
                rules = session_rules(record["hash"], grants.get(record["role"], []))
                if self._applied.get(user) != rules:
                    await self._set_user(user, rules)

    async def run(self, interval: float = 1.0) -> None:
        """``reconcile`` every ``interval`` seconds until cancelled."""
        while True:
            try:
                await self.reconcile()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis or the database away: try again next time
                log.warning("data-plane sessions not reconciled: %s", exc)
            await asyncio.sleep(interval)
