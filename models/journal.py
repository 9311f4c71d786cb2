"""Append-only tables: the audit log and the change-event outbox."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Index, String, Table, and_, bindparam, exists, func, insert, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped, Session, mapped_column
from sqlalchemy.sql.dml import UpdateBase

from models.base import Base, BigId, Json, Timestamp, utcnow


class AuditEntry(Base):
    """Who changed what, when, from which value to which."""

    __tablename__ = "audit_log"
    __table_args__ = (Index("ix_audit_log_entity_at", "entity_type", "entity", "at"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow, index=True)
    role: Mapped[str] = mapped_column(String(255))
    request_id: Mapped[str] = mapped_column(String(64))
    action: Mapped[str] = mapped_column(String(16))
    entity_type: Mapped[str] = mapped_column(String(64))
    entity: Mapped[str] = mapped_column(String(700))
    before: Mapped[Any] = mapped_column(Json, nullable=True)
    after: Mapped[Any] = mapped_column(Json, nullable=True)


class OutboxEvent(Base):
    """A change event written in the same transaction as the change, published afterwards."""

    __tablename__ = "outbox_events"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)
    kind: Mapped[str] = mapped_column(String(64))
    entity: Mapped[str] = mapped_column(String(700))
    payload: Mapped[dict[str, Any]] = mapped_column(Json, default=dict)
    published_at: Mapped[datetime | None] = mapped_column(Timestamp, index=True)


def record_change(
    session: Session | AsyncSession,
    *,
    role: str,
    request_id: str,
    kind: str,
    entity_type: str,
    entity: str,
    before: Any,
    after: Any,
    **payload: Any,
) -> OutboxEvent:
    """Add an audit entry and a change event for one change, in the caller's transaction;
    return the event.

    The action is derived from ``before`` / ``after``: create, delete or update.
    """
    if before is None:
        action = "create"
    elif after is None:
        action = "delete"
    else:
        action = "update"
    session.add(
        AuditEntry(
            role=role,
            request_id=request_id,
            action=action,
            entity_type=entity_type,
            entity=entity,
            before=before,
            after=after,
        )
    )
    event = OutboxEvent(kind=kind, entity=entity, payload={"action": action, **payload})
    session.add(event)
    return event


def change_rows(
    *,
    role: str,
    request_id: str,
    kind: str,
    changes: list[tuple[str, str, Any, Any, dict[str, Any]]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Audit rows and change-event rows for many changes at once (bulk inserts):
    ``changes`` holds (entity type, entity, before, after, event payload)."""
    audit, events = [], []
    now = utcnow()
    for entity_type, entity, before, after, payload in changes:
        action = "create" if before is None else "delete" if after is None else "update"
        audit.append(
            {
                "at": now,
                "role": role,
                "request_id": request_id,
                "action": action,
                "entity_type": entity_type,
                "entity": entity,
                "before": before,
                "after": after,
            }
        )
        events.append(
            {
                "created_at": now,
                "kind": kind,
                "entity": entity,
                "payload": {"action": action, **payload},
            }
        )
    return audit, events


@dataclass(frozen=True, slots=True)
class Change:
    """One change a unit of work records: its audit entry and its change event."""

    kind: str
    entity_type: str
    entity: str
    before: Any
    after: Any
    payload: dict[str, Any] = field(default_factory=dict)

    @property
    def action(self) -> str:
        """create, delete or update, from ``before`` / ``after``."""
        if self.before is None:
            return "create"
        return "delete" if self.after is None else "update"


@dataclass(frozen=True, slots=True)
class WrittenEvent:
    """A change event as written to the outbox (what the relay publishes)."""

    id: int
    created_at: datetime
    kind: str
    entity: str
    payload: dict[str, Any]


async def write_changes(
    session: AsyncSession,
    *,
    role: str,
    request_id: str,
    changes: list[Change],
    statements: Sequence[tuple[UpdateBase, dict[str, Any]]] = (),
    refusals: Sequence[Exception | None] = (),
) -> list[WrittenEvent]:
    """Insert the audit entries and change events of ``changes`` in the caller's
    transaction, after executing ``statements`` (writes the changes describe, each with its
    parameters); return the events, in order.

    ``refusals`` goes with ``statements`` (missing ones are None): a statement with one
    returns rows (``INSERT ... ON CONFLICT DO NOTHING RETURNING``), and when it wrote none
    its refusal is raised (the caller rolls back; for one change on PostgreSQL the statement
    then wrote no audit entry and no event either, the first refusal is raised).

    On PostgreSQL everything is one statement (the audit rows and the other writes in
    data-modifying CTEs), one round trip whatever the number of changes."""
    params: dict[str, Any] = {}
    for _statement, values in statements:
        params.update(values)
    guarded = tuple(i for i, refusal in enumerate(refusals) if refusal is not None)
    if not changes or session.bind is None or session.bind.dialect.name != "postgresql":
        for index, (statement, values) in enumerate(statements):
            result = await session.execute(statement, values)
            if index in guarded and result.first() is None:
                raise cast(Exception, refusals[index])
    if not changes:
        return []
    now = utcnow()
    audit = [
        {
            "at": now,
            "role": role,
            "request_id": request_id,
            "action": c.action,
            "entity_type": c.entity_type,
            "entity": c.entity,
            "before": c.before,
            "after": c.after,
        }
        for c in changes
    ]
    payloads = [{"action": c.action, **c.payload} for c in changes]
    events = [
        {"created_at": now, "kind": c.kind, "entity": c.entity, "payload": payload}
        for c, payload in zip(changes, payloads, strict=True)
    ]
    assert session.bind is not None
    # Core inserts on the tables: the ORM's bulk-insert layer would cost more than the rest.
    outbox = cast(Table, OutboxEvent.__table__)
    audit_log = cast(Table, AuditEntry.__table__)
    if session.bind.dialect.name == "postgresql":
        ids = await _write_on_postgresql(session, audit, events, statements, params, refusals)
    else:
        await session.execute(insert(audit_log), audit)
        ids = []
        for event in events:
            statement = insert(outbox).values(event).returning(outbox.c.id)
            ids.append((await session.execute(statement)).scalar_one())
    return [
        WrittenEvent(event_id, now, c.kind, c.entity, payload)
        for event_id, c, payload in zip(ids, changes, payloads, strict=True)
    ]


async def _write_on_postgresql(
    session: AsyncSession,
    audit: list[dict[str, Any]],
    events: list[dict[str, Any]],
    statements: Sequence[tuple[UpdateBase, dict[str, Any]]],
    params: dict[str, Any],
    refusals: Sequence[Exception | None],
) -> list[int]:
    """``write_changes`` on PostgreSQL: the ``audit`` rows, the ``events`` and the
    ``statements`` (their parameters merged in ``params``) in one statement; the events'
    ids, in order."""
    outbox = cast(Table, OutboxEvent.__table__)
    audit_log = cast(Table, AuditEntry.__table__)
    guarded = tuple(i for i, refusal in enumerate(refusals) if refusal is not None)
    if len(events) == 1:
        # The usual case: a statement built once per shape of deferred writes, its
        # values as parameters (no statement to build, no cache key to compute).
        statement = _one_change_statement(tuple(s for s, _values in statements), guarded)
        params.update({f"event_{k}": v for k, v in events[0].items()})
        params.update({f"audit_{k}": v for k, v in audit[0].items()})
        rows = (await session.execute(statement, params)).all()
        if not rows:  # a guarded write wrote nothing, nor did the statement
            raise cast(Exception, refusals[guarded[0]])
        return [rows[0][0]]
    # A multi-row VALUES is compiled each time (in the request's transaction: a refused
    # write rolls the rest back with it).
    statement = insert(outbox).values(events)
    ctes = [write.cte(f"write_{i}") for i, (write, _values) in enumerate(statements)]
    for cte in ctes:
        statement = statement.add_cte(cte)
    statement = statement.add_cte(insert(audit_log).values(audit).cte("audit"))
    # The ids come from the sequence in the order of the VALUES rows.
    returning = statement.returning(outbox.c.id, *_written(ctes, guarded))
    rows = sorted((await session.execute(returning, params)).all())
    for index, written in zip(guarded, rows[0][1:], strict=True):
        if not written:
            raise cast(Exception, refusals[index])
    return [row[0] for row in rows]


_ONE_CHANGE: dict[tuple[tuple[UpdateBase, ...], tuple[int, ...]], Any] = {}
_ONE_CHANGE_MAX = 256
_EVENT_COLUMNS = ("created_at", "kind", "entity", "payload")
_AUDIT_COLUMNS = ("at", "role", "request_id", "action", "entity_type", "entity", "before", "after")


def _written(ctes: Sequence[Any], guarded: tuple[int, ...]) -> list[Any]:
    """For each of the ``guarded`` writes (by index in ``ctes``): whether it returned a row
    (the number of rows it returned, as a column of the statement's own RETURNING)."""
    return [select(func.count()).select_from(ctes[i]).scalar_subquery() for i in guarded]


def _one_change_statement(writes: tuple[UpdateBase, ...], guarded: tuple[int, ...] = ()) -> Any:
    """The PostgreSQL statement that writes one change event (parameters ``event_<column>``)
    and its audit entry (``audit_<column>``) after the deferred ``writes`` (statements built
    once, with parameters of their own), returning the event's id; built once per tuple of
    writes.  With ``guarded`` writes, the entry and the event are written only when each of
    them returned a row: otherwise the statement writes nothing more and returns no row."""
    statement = _ONE_CHANGE.get((writes, guarded))
    if statement is None:
        outbox = cast(Table, OutboxEvent.__table__)
        audit_log = cast(Table, AuditEntry.__table__)
        ctes = [write.cte(f"write_{index}") for index, write in enumerate(writes)]
        event = {c: bindparam(f"event_{c}", type_=outbox.c[c].type) for c in _EVENT_COLUMNS}
        audit = {c: bindparam(f"audit_{c}", type_=audit_log.c[c].type) for c in _AUDIT_COLUMNS}
        if guarded:
            written = and_(*(exists().select_from(ctes[i]) for i in guarded))
            statement = insert(outbox).from_select(
                list(event), select(*event.values()).where(written)
            )
            audit_insert = insert(audit_log).from_select(
                list(audit), select(*audit.values()).where(written)
            )
        else:
            statement = insert(outbox).values(event)
            audit_insert = insert(audit_log).values(audit)
        for cte in ctes:
            statement = statement.add_cte(cte)
        statement = statement.add_cte(audit_insert.cte("audit"))
        statement = statement.returning(outbox.c.id)
        if len(_ONE_CHANGE) < _ONE_CHANGE_MAX:  # writes are built once: a few shapes
            _ONE_CHANGE[(writes, guarded)] = statement
    return statement
