"""Request dependencies, as ``Annotated`` aliases so route signatures read like prose."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request

from api.errors import redis_unavailable
from api.state import AppState
from api.unit_of_work import ANONYMOUS, Caller, UnitOfWork

log = logging.getLogger(__name__)
TRUE_WORDS = frozenset({"true", "1", "yes", "on"})


# Dependencies are coroutines even when they do not await: FastAPI runs plain functions in
# a thread pool, a thread hop per request for nothing.


async def get_state(request: Request) -> AppState:
    """The process-wide state built by the app factory."""
    return request.app.state.sluice


async def get_caller(request: Request) -> Caller:
    """The calling role (set by ``api.auth.authorize``; anonymous while authentication is
    off) and the request id."""
    state = request.scope.get("state", {})
    return Caller(role=state.get("role", ANONYMOUS), request_id=state.get("request_id", ""))


def query_flag(request: Request, name: str) -> bool:
    """A boolean query parameter, accepting Java's ``True``/``False`` spellings."""
    return request.query_params.get(name, "").strip().lower() in TRUE_WORDS


StateDep = Annotated[AppState, Depends(get_state)]
CallerDep = Annotated[Caller, Depends(get_caller)]


async def get_unit_of_work(
    request: Request, state: StateDep, caller: CallerDep
) -> AsyncIterator[UnitOfWork]:
    """One transaction per request: commit after the handler, or roll back.

    After the commit the outbox relay is woken and the after-commit hooks run (they project
    the change into Redis at once; the workers would otherwise do it within moments).  When
    one finds Redis unavailable, the rest are skipped and the answer says enforcement is
    pending: the relay publishes the events once Redis is back.

    ``dryRun=true`` on any request always rolls back, so the handler may perform the write,
    compute what it would produce, and leave nothing behind.
    """
    async with state.sessions() as session:
        uow = UnitOfWork(
            session,
            caller,
            dry_run=query_flag(request, "dryRun"),
            data_plane=state.data_plane,
        )
        try:
            yield uow
        except BaseException:
            await session.rollback()
            raise
        if uow.dry_run:
            await session.rollback()
            return
        try:
            await uow.commit()
        except BaseException:
            # A COMMIT whose answer was lost may have happened (the database restarted
            # under it): have the relay sweep the outbox now rather than after its grace.
            if uow.emitted:
                state.relay.notify()
            raise
    redis_down = False
    for hook in uow.after_commit_hooks:
        # Best effort: workers reconcile the data plane from the database anyway.
        try:
            await hook()
        except Exception as exc:
            log.warning("after-commit step failed (workers will reconcile): %s", exc)
            if redis_unavailable(exc):
                # The next steps, and publishing, would each wait for Redis in vain.
                redis_down = True
                break
    if uow.emitted:
        state.cache.local_write(uow.events)
        if redis_down:
            state.relay.notify()
            request.state.enforcement = "pending"
        else:
            await enforce(request, state, uow)
    if uow.permission_roles:
        await refresh_dataplane_acl(request, uow.permission_roles)


async def enforce(request: Request, state: AppState, uow: UnitOfWork) -> None:
    """Publish the request's change events and wait until every worker enforces them.

    The answer says so when that could not be confirmed (``X-Sluice-Enforcement``): the
    change is committed either way and reaches the workers as soon as Redis allows."""
    started = time.perf_counter()
    try:
        # The fleet to wait for is read in the same round trip, right after the events.
        position, (fleet,) = await state.relay.publish(uow.events, state.enforcement.queue_fleet)
    except Exception as exc:
        log.warning("change events not published yet (the relay retries): %s", exc)
        state.relay.notify()
        request.state.enforcement = "pending"
        state.metrics.enforced("pending", time.perf_counter() - started)
        return
    outcome = await state.enforcement.wait(position, fleet)
    if outcome.pending:
        request.state.enforcement = "pending"
    elif outcome.fenced:
        request.state.enforcement = "fenced " + ",".join(outcome.fenced)
    ended = "pending" if outcome.pending else "fenced" if outcome.fenced else "confirmed"
    state.metrics.enforced(ended, time.perf_counter() - started)


async def refresh_dataplane_acl(request: Request, roles: set[str]) -> None:
    """Tell the data plane's credential manager that these roles' grants changed.

    The one place that calls ``AppState.dataplane_acl.refresh_role``: after the commit and
    the enforcement wait, so it reads the change as durable (a dry run never gets here).
    Without a credential manager it does nothing.  A failure leaves the change committed and
    the answer says enforcement is pending (``X-Sluice-Enforcement``).
    """
    acl = request.app.state.sluice.dataplane_acl
    if acl is None:
        return
    for role in sorted(roles):
        try:
            await acl.refresh_role(role)
        except Exception as exc:
            log.warning("data-plane credentials of role %r not refreshed: %s", role, exc)
            request.state.enforcement = "pending"


UowDep = Annotated[UnitOfWork, Depends(get_unit_of_work, scope="function")]
