"""WebSocket connections admitted by a produce or consume grant, checked again when grants
change: a revoked grant closes them (code 1008, policy violation), as a revoked grant makes a
Python client's next call fail.

A connection admitted by the access policy itself (a super-user, an admin role of the tenant,
or authorization off) is not tracked: a grant does not change what those may do.  Every
admin replica follows the change events, so a revoke made through any replica closes the
connections of all (``api.policy_cache`` calls ``recheck`` on a ``permissions`` event).  A
consumer is also checked against its subscription's role list (``permissions/subscription``):
taking its role out of the list closes it too.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from starlette.websockets import WebSocket, WebSocketState

from api.sessions.service import check_subscribe, may_use
from models.errors import Forbidden
from sluice.protocol.names import TopicName

log = logging.getLogger(__name__)
POLICY_VIOLATION = 1008


@dataclass(eq=False)
class GrantedSocket:
    """One open connection, the role it serves and what its grant allowed."""

    websocket: WebSocket
    role: str
    topic: TopicName
    action: str
    subscription: str | None = None


@dataclass
class GrantedSockets:
    """The open connections admitted by a grant."""

    open: set[GrantedSocket] = field(default_factory=set)

    @contextlib.contextmanager
    def holding(
        self,
        websocket: WebSocket,
        role: str,
        topic: TopicName,
        action: str,
        subscription: str | None = None,
    ) -> Iterator[None]:
        """Track the connection while the block runs."""
        entry = GrantedSocket(websocket, role, topic, action, subscription)
        self.open.add(entry)
        try:
            yield
        finally:
            self.open.discard(entry)

    async def recheck(self, sessions: Any, database: Any = None) -> int:
        """Close every tracked connection whose role no longer holds its grant (or, for a
        consumer, whose subscription's role list no longer admits it: ``database``, a session
        factory, reads the lists); how many."""
        entries = list(self.open)
        if not entries or sessions is None:
            return 0
        grants = await sessions.grants(sorted({e.role for e in entries}))
        closed = 0
        async with contextlib.AsyncExitStack() as stack:
            session = None
            if database is not None and any(e.subscription for e in entries):
                session = await stack.enter_async_context(database())
            for entry in entries:
                reason = await _refusal(entry, grants.get(entry.role, []), session)
                if reason is None:
                    continue
                self.open.discard(entry)
                closed += 1
                log.info("websocket closed: %s", reason)
                if entry.websocket.application_state is WebSocketState.CONNECTED:
                    with contextlib.suppress(Exception):
                        await entry.websocket.close(code=POLICY_VIOLATION, reason=reason[:120])
        return closed


async def _refusal(entry: GrantedSocket, grants: Any, session: Any) -> str | None:
    """Why the connection may no longer stay open, or None while it may."""
    if not may_use(grants, entry.topic, entry.action):
        return f"Authorization revoked: {entry.role} may not {entry.action} {entry.topic}"
    if entry.subscription is None or session is None:
        return None
    try:
        await check_subscribe(session, grants, entry.topic, entry.role, entry.subscription)
    except Forbidden as exc:
        return f"Authorization revoked: {exc.reason}"
    return None
