"""Routes of ``/admin/v2/dataplane``: a client's session (its Redis credentials) and the
lookups of the topics it uses.  Any authenticated role may call them; what the session may do
and which topics it may look up follow the role's grants."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import Depends, Path, Query, Request
from starlette.responses import Response

from api.deps import CallerDep, StateDep, UowDep
from api.routing import SluiceRoute, SluiceRouter
from api.sessions import service
from api.sessions.schemas import PartitionsDocument, SessionDocument
from api.topics.router import TopicDep
from dataplane.acl import ALL_TOPICS
from dataplane.sessions import Grants, Issued, SessionNotFound, Sessions
from models.errors import NotFound
from sluice.protocol.names import check_subscription

router = SluiceRouter(prefix="/admin/v2/dataplane", tags=["dataplane"], route_class=SluiceRoute)


def _sessions(request: Request) -> Sessions | None:
    return request.app.state.sluice.dataplane_acl


def _expiry(request: Request) -> float | None:
    return request.scope.get("state", {}).get("token_expires")


SessionsDep = Annotated[Sessions | None, Depends(_sessions)]


def _document(state: StateDep, issued: Issued | None, ttl: float) -> SessionDocument:
    url = service.client_url(state.settings.effective_redis_url, state.settings.dataplane_url)
    if issued is None:
        return SessionDocument(serviceUrl=url)
    return SessionDocument(
        serviceUrl=url,
        username=issued.user,
        password=issued.password,
        role=issued.role,
        expiresAt=issued.expires_ms,
        renewAfterSeconds=_renew_after(issued, ttl),
    )


def _renew_after(issued: Issued, ttl: float) -> float:
    """Half the session's life left: a session cut short by its token's expiry is renewed
    (with the supplier's next token) before it ends, not half a full session later."""
    left = issued.expires_ms / 1000 - time.time()
    return round(max(min(left, ttl) / 2, 0.5), 3)


@router.post("/sessions", response_model=SessionDocument, status_code=201)
async def open_session(
    request: Request, state: StateDep, caller: CallerDep, sessions: SessionsDep
) -> SessionDocument:
    """Redis credentials for the caller's role (none while authentication is off: then any
    client may use Redis directly)."""
    if sessions is None:
        return _document(state, None, 0)
    issued = await sessions.issue(caller.role, _expiry(request))
    return _document(state, issued, sessions.ttl)


@router.post("/sessions/{session}", response_model=SessionDocument)
async def renew_session(
    request: Request,
    state: StateDep,
    caller: CallerDep,
    sessions: SessionsDep,
    session: str = Path(max_length=64),
) -> SessionDocument:
    """Extend the caller's session (never past its token's expiry); 404 when it has ended.
    Also loads the data-plane scripts, which a Redis restart forgets."""
    if sessions is None:
        raise NotFound("Data-plane sessions are not in use: authentication is off")
    try:
        issued = await sessions.renew(session, caller.role, _expiry(request))
    except SessionNotFound:
        raise NotFound(f"Session {session} does not exist or has ended") from None
    return _document(state, issued, sessions.ttl)


@router.delete("/sessions/{session}", status_code=204)
async def close_session(
    caller: CallerDep, sessions: SessionsDep, session: str = Path(max_length=64)
) -> Response:
    """End the caller's session now; Redis closes its connections."""
    if sessions is None or not await sessions.close(session, caller.role):
        raise NotFound(f"Session {session} does not exist or has ended")
    return Response(status_code=204)


@router.get(
    "/partitions/persistent/{tenant}/{namespace}/{topic}", response_model=PartitionsDocument
)
async def topic_partitions(
    topic: TopicDep,
    state: StateDep,
    caller: CallerDep,
    sessions: SessionsDep,
    uow: UowDep,
    subscription: str | None = Query(None, max_length=255),
) -> PartitionsDocument:
    """The partition count of a topic the caller may produce to or consume from, creating it
    on first use when the broker allows (``allowAutoTopicCreation``).  With ``subscription``,
    the caller is about to subscribe with that name: 403 unless it may consume with it (its
    namespace's subscription permissions, Pulsar's ``permissions/subscription``)."""
    if sessions is None:
        grants: Grants = [(ALL_TOPICS, service.BOTH)]
    else:
        grants = (await sessions.grants([caller.role]))[caller.role]
    if subscription is not None:
        name = check_subscription(subscription)
        await service.check_subscribe(uow.session, grants, topic, caller.role, name)
    count = await service.partitions(
        state.redis, state.data_plane.scripts, topic, grants, caller.role
    )
    return PartitionsDocument(partitions=count)
