"""Store, read and remove one policy value, with its audit entry and change event.

A ``Slot`` says where a value lives (ORM class and unique key), the columns a new row needs,
and how its change is recorded.  The ORM class is ``Stored``: it turns a domain value into
column values and its stored value back into JSON (the audit's before and after).

A write locks the row (or inserts it) in one statement and leaves the UPDATE to the end of
the request, where one statement writes it together with the audit row and the outbox event:
no extra round trip while the row is locked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlalchemy import bindparam, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm.attributes import set_committed_value

from api.unit_of_work import UnitOfWork
from models.base import utcnow
from models.repository import insert_or_lock


class Stored(Protocol):
    """An ORM row holding one policy value."""

    @classmethod
    def columns_for(cls, value: Any) -> dict[str, Any]:
        """Column values that store ``value``."""
        ...

    def stored_json(self) -> Any:
        """The stored value as JSON."""
        ...


@dataclass(frozen=True, slots=True)
class Slot:
    """Where one policy value lives and how a change to it is recorded.

    ``key`` is the row's unique key (column -> value); ``columns`` are the identity columns
    of a new row besides the key; ``change``, ``entity_type``, ``entity`` and ``payload``
    make the audit entry and the change event.
    """

    model: Any  # an ORM class that is ``Stored``
    key: dict[str, Any]
    change: str
    entity_type: str
    entity: str
    columns: dict[str, Any] = field(default_factory=dict)
    payload: dict[str, Any] = field(default_factory=dict)


async def find(session: AsyncSession, slot: Slot, *, lock: bool = False) -> Any:
    """The stored row, or None; ``lock`` holds it until the transaction ends."""
    query = select(slot.model).filter_by(**slot.key)
    if lock:
        query = query.with_for_update()
    return await session.scalar(query)


async def store(uow: UnitOfWork, slot: Slot, value: Any) -> None:
    """Store ``value`` in the slot (insert or replace), with audit entry and event.

    The UPDATE of a stored value goes out with the audit entry and the change event, in
    their statement (``UnitOfWork.write_later``): the row stays locked one round trip less.
    A dry run, which reads the new value back, updates the row through the session."""
    values = slot.model.columns_for(value)
    row, created = await insert_or_lock(
        uow.session, slot.model, {**slot.key, **slot.columns, **values}, slot.key
    )
    before = None if created else row.stored_json()
    if created or uow.dry_run:
        for name, column_value in values.items():
            setattr(row, name, column_value)  # written at the next flush
    else:
        changed = {k: v for k, v in values.items() if getattr(row, k) != v}
        if changed and "updated_at" in slot.model.__table__.columns:
            # Set here: a statement inside another one gets no column defaults.
            changed["updated_at"] = utcnow()
        for name, column_value in changed.items():
            set_committed_value(row, name, column_value)  # the session's view, not flushed
        if changed:
            prefix = f"w{len(uow.deferred)}_"
            pk = slot.model.__table__.primary_key.columns
            params = {f"{prefix}{name}": value for name, value in changed.items()}
            params.update({f"{prefix}pk_{column.key}": getattr(row, column.key) for column in pk})
            uow.write_later(_update_statement(slot.model, tuple(changed), prefix), params)
    _record(uow, slot, before, row.stored_json())


_UPDATES: dict[tuple[Any, tuple[str, ...], str], Any] = {}


def _update_statement(model: Any, columns: tuple[str, ...], prefix: str) -> Any:
    """The UPDATE of ``columns`` of one ``model`` row by its primary key, built once per
    shape: parameters ``<prefix><column>`` and ``<prefix>pk_<key>``.  The prefix (the
    statement's place among the request's deferred writes) keeps the parameter names of
    several writes apart when they share one statement."""
    statement = _UPDATES.get((model, columns, prefix))
    if statement is None:
        table = model.__table__
        statement = (
            update(table)
            .where(
                *(
                    column == bindparam(f"{prefix}pk_{column.key}", type_=column.type)
                    for column in table.primary_key.columns
                )
            )
            .values(
                {name: bindparam(f"{prefix}{name}", type_=table.c[name].type) for name in columns}
            )
        )
        _UPDATES[(model, columns, prefix)] = statement
    return statement


async def remove(uow: UnitOfWork, slot: Slot) -> None:
    """Remove the value stored in the slot; removing nothing is not an error (as in Pulsar)."""
    row = await find(uow.session, slot, lock=True)
    if row is None:
        return
    before = row.stored_json()
    await uow.session.delete(row)
    await uow.session.flush()
    _record(uow, slot, before, None)


def _record(uow: UnitOfWork, slot: Slot, before: Any, after: Any) -> None:
    uow.record(slot.change, slot.entity_type, slot.entity, before, after, **slot.payload)
