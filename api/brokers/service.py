"""Dynamic broker configuration: list, read, override and reset the registry's keys."""

from __future__ import annotations

from sqlalchemy import select

from api.unit_of_work import UnitOfWork
from models.broker_config import DYNAMIC_KEYS, dynamic_key
from models.orm import BrokerConfigOverride
from models.repository import insert_or_lock, load_broker_config


def dynamic_names() -> list[str]:
    """Names of every key that may change at runtime."""
    return list(DYNAMIC_KEYS)


async def overrides(uow: UnitOfWork) -> dict[str, str]:
    """The values set through the API (Pulsar's ``configuration/values``)."""
    rows = await uow.session.execute(
        select(BrokerConfigOverride.name, BrokerConfigOverride.value).order_by(
            BrokerConfigOverride.name
        )
    )
    return dict(rows.all())


async def runtime(uow: UnitOfWork) -> dict[str, str]:
    """Every key with its effective value (Pulsar's ``configuration/runtime``)."""
    return (await load_broker_config(uow.session)).runtime()


async def set_override(uow: UnitOfWork, name: str, value: str) -> None:
    """Override a dynamic key; 404 unknown, 412 static or invalid value."""
    key = dynamic_key(name)
    text = key.render(key.parse(value))
    row, created = await insert_or_lock(
        uow.session, BrokerConfigOverride, {"name": name, "value": text}, {"name": name}
    )
    before = None if created else row.value
    row.value = text
    await uow.session.flush()
    uow.record("broker.config", "broker.config", name, before, text, name=name)


async def delete_override(uow: UnitOfWork, name: str) -> None:
    """Reset a dynamic key to its default; 404 unknown, 412 static."""
    dynamic_key(name)
    row = await uow.session.scalar(
        select(BrokerConfigOverride).where(BrokerConfigOverride.name == name).with_for_update()
    )
    if row is None:
        return
    before = row.value
    await uow.session.delete(row)
    await uow.session.flush()
    uow.record("broker.config", "broker.config", name, before, None, name=name)
