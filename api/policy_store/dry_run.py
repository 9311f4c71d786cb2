"""The answer to a policy write: 204, or for ``dryRun=true`` 200 with what it would produce.

A dry run performs the write inside the request's transaction, reports the limits of every
affected topic, and the unit of work rolls it all back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.responses import Response

from api.responses import JsonResponse, no_content
from api.unit_of_work import UnitOfWork

TopicsReport = Callable[[], Awaitable[list[dict[str, Any]]]]


async def write_answer(
    uow: UnitOfWork, topics: TopicsReport, changed: str | None = None
) -> Response:
    """204 for a real write; for a dry run ``{"dryRun": true, "changed"?, "topics": [...]}``
    with ``topics()`` computed after the write (``changed`` is left out when None)."""
    if not uow.dry_run:
        return no_content()
    await uow.session.flush()
    answer: dict[str, Any] = {"dryRun": True}
    if changed is not None:
        answer["changed"] = changed
    answer["topics"] = await topics()
    return JsonResponse(answer)
