"""Dynamic broker configuration: list, read, override and reset the registry's keys.

An override is one ``BrokerConfigOverride`` row per key; writes go through the shared policy
path (``api.policy_store``), so the value, its audit entry and its ``broker.config`` change
event commit together.
"""

from __future__ import annotations

from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from api.policy_store.store import Slot, remove, store
from api.unit_of_work import UnitOfWork
from models.broker_config import DYNAMIC_KEYS, dynamic_key
from models.orm import BrokerConfigOverride
from models.repository import load_broker_config


def dynamic_names() -> list[str]:
    """Names of every key that may change at runtime."""
    return list(DYNAMIC_KEYS)


def config_slot(name: str) -> Slot:
    """Where the override of ``name`` is stored, and how its changes are recorded."""
    return Slot(
        BrokerConfigOverride,
        {"name": name},
        change="broker.config",
        entity_type="broker.config",
        entity=name,
        payload={"name": name},
    )


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
    await store(uow, config_slot(name), key.render(key.parse(value)))


async def delete_override(uow: UnitOfWork, name: str) -> None:
    """Reset a dynamic key to its default; 404 unknown, 412 static."""
    dynamic_key(name)
    await remove(uow, config_slot(name))


async def database_answers(engine: AsyncEngine) -> None:
    """Readiness of the database: a trivial query answers (raises when it does not)."""
    async with engine.connect() as connection:
        await connection.execute(text("SELECT 1"))
