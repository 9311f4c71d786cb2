"""The request's unit of work: one session, plus the audit rows and change events it writes.

Services never commit.  They call ``record`` next to their writes, so the change, its audit
entry and its outbox event share one transaction; the request dependency writes the recorded
entries (``write_changes``: one statement for all of them), commits once (or rolls back, and
for a dry run always rolls back), then publishes the events.  A write that must be durable
before the request goes on (a report run recorded before its task is sent) takes a unit of
work of its own, ``committed``, which commits the same way when its block ends.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.sql.dml import UpdateBase

from api.dataplane import DataPlane
from models.db import without_transaction
from models.journal import Change, WrittenEvent, write_changes

ANONYMOUS = "anonymous"


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is calling: the authenticated role (or anonymous) and the request id."""

    role: str = ANONYMOUS
    request_id: str = ""


class UnitOfWork:
    """A session with helpers that record audit entries and outbox events."""

    def __init__(
        self,
        session: AsyncSession,
        caller: Caller,
        *,
        dry_run: bool = False,
        data_plane: DataPlane | None = None,
    ) -> None:
        self.session = session
        self.data_plane = data_plane
        self.caller = caller
        self.dry_run = dry_run
        self.changes: list[Change] = []
        # Written with the changes (``write_later``): statements and their parameters.
        self.deferred: list[tuple[UpdateBase, dict[str, Any]]] = []
        self.refusals: list[Exception | None] = []  # one per deferred statement
        self.events: list[WrittenEvent] = []  # the changes' events, once written
        self.after_commit_hooks: list[Callable[[], Awaitable[None]]] = []
        # Roles whose produce/consume grants this unit of work changed or removed; the
        # request dependency has the data plane's credentials refreshed for them once the
        # change is durable (``api.deps.refresh_dataplane_acl``).
        self.permission_roles: set[str] = set()
        self.one_statement = False  # see ``writes_in_one_statement``

    def after_commit(self, hook: Callable[[], Awaitable[None]]) -> None:
        """Run ``hook`` once the transaction has committed (never after a rollback)."""
        self.after_commit_hooks.append(hook)

    def permissions_changed(self, *roles: str) -> None:
        """Note roles whose grants change in this unit of work (see ``permission_roles``)."""
        self.permission_roles.update(roles)

    def project(self, step: Callable[[DataPlane], Awaitable[None]]) -> None:
        """After the commit, apply ``step(data_plane)`` to Redis, before the answer goes out,
        so a client that calls right after the answer sees the change."""
        data_plane = self.data_plane
        if data_plane is not None:
            self.after_commit(lambda: step(data_plane))

    def record(
        self,
        kind: str,
        entity_type: str,
        entity: str,
        before: Any,
        after: Any,
        **payload: Any,
    ) -> None:
        """Audit and emit one change (same transaction, written by ``write_changes``); the
        action follows from before/after."""
        self.changes.append(Change(kind, entity_type, entity, before, after, payload))

    def write_later(
        self,
        statement: UpdateBase,
        params: dict[str, Any] | None = None,
        *,
        refusal: Exception | None = None,
    ) -> None:
        """Execute ``statement`` with ``params`` together with the audit entries and change
        events (in their statement on PostgreSQL): a round trip less while a locked row
        waits for the commit.  Only for a write nothing in the request reads back from the
        database.  The parameter names of the request's deferred statements must differ.

        With ``refusal``, the statement returns the rows it wrote (``INSERT ... ON CONFLICT
        DO NOTHING RETURNING``), and writing none raises ``refusal`` at the commit: the
        request fails with it and rolls back, as if it had been raised before."""
        self.deferred.append((statement, params or {}))
        self.refusals.append(refusal)

    async def writes_in_one_statement(self) -> None:
        """Declare that this request writes one change, only through ``record`` and
        ``write_later``: on PostgreSQL that is one statement, atomic by itself, so the
        request needs no transaction around it.  Its reads then run outside one (READ
        COMMITTED gives each statement its own snapshot either way) and the statement
        commits by itself: no BEGIN and no COMMIT, two round trips less.  A dry run keeps
        its transaction (it may write before it rolls back).  Call before any statement."""
        if not self.dry_run:
            await without_transaction(self.session)
            self.one_statement = True

    async def write_changes(self) -> None:
        """Write the deferred statements, the audit entries and the change events recorded
        so far (before the commit)."""
        # Outside a transaction, more than one statement would not be atomic.
        assert not self.one_statement or len(self.changes) == 1
        changes, self.changes = self.changes, []
        statements, self.deferred = self.deferred, []
        refusals, self.refusals = self.refusals, []
        self.events += await write_changes(
            self.session,
            role=self.caller.role,
            request_id=self.caller.request_id,
            changes=changes,
            statements=statements,
            refusals=refusals,
        )

    async def commit(self) -> None:
        """Write what was recorded and commit: only the request dependency and
        ``committed`` call it, once their block of work has ended."""
        await self.write_changes()
        await self.session.commit()

    @property
    def emitted(self) -> int:
        """Change events recorded in this unit of work."""
        return len(self.events) + len(self.changes)


@asynccontextmanager
async def committed(
    sessions: async_sessionmaker[AsyncSession], caller: Caller
) -> AsyncIterator[UnitOfWork]:
    """A unit of work of its own: committed when the block ends, rolled back when it
    raises."""
    async with sessions() as session:
        uow = UnitOfWork(session, caller)
        try:
            yield uow
        except BaseException:
            await session.rollback()
            raise
        await uow.commit()
