"""The one write path of every policy kind: check the value, store or remove it with its audit
entry and change event (``api.policy_store``), and answer: 204, or for ``dryRun=true`` 200 with
the limits every affected topic would get (the kind's family reports them)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.responses import Response

from api.limits.values import Posted, Where
from api.policy_store.dry_run import write_answer
from api.policy_store.store import remove, store
from api.policy_store.target import PolicyTarget
from api.unit_of_work import UnitOfWork

if TYPE_CHECKING:
    from api.limits.kinds import PolicyKind


async def write_policy_answer(uow: UnitOfWork, kind: PolicyKind, target: PolicyTarget) -> Response:
    """204, or for a dry run 200 with the would-be limits (of the kind's family) of every
    affected topic."""

    async def topics() -> list[dict[str, Any]]:
        return await kind.family.report(
            uow.session, namespace_id=target.namespace.id, topic_id=target.topic_id
        )

    return await write_answer(uow, topics, changed=target.entity)


async def set_policy(
    uow: UnitOfWork, kind: PolicyKind, target: PolicyTarget, posted: Posted, where: Where
) -> Response:
    """The one write path of every kind: check the value, store it with its audit entry and
    change event, answer (or report the dry run)."""
    value = await kind.parse(uow, posted, where)
    slot = kind.family.slot(target, kind.key(kind, posted.query))
    await store(uow, slot, kind.family.encode(value))
    return await write_policy_answer(uow, kind, target)


async def remove_policy(
    uow: UnitOfWork, kind: PolicyKind, target: PolicyTarget, posted: Posted
) -> Response:
    """Remove the kind's value at the target (nothing stored is not an error)."""
    await remove(uow, kind.family.slot(target, kind.key(kind, posted.query)))
    return await write_policy_answer(uow, kind, target)
