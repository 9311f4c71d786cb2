"""Routes of ``/admin/v2/brokers``: dynamic configuration, health, readiness, live workers."""

import asyncio

from fastapi import Query
from starlette.responses import PlainTextResponse, Response

from api.brokers import service
from api.brokers.schemas import NotReady, ReadyChecks, WorkerDocument
from api.dataplane import live_workers
from api.deps import StateDep, UowDep
from api.limits.provenance import provenance_for
from api.limits.schemas import BrokerDryRun
from api.policy_store.dry_run import write_answer
from api.responses import JsonResponse
from api.routing import SluiceRoute, SluiceRouter
from models.errors import NotFound
from sluice.protocol.names import check_cluster

router = SluiceRouter(prefix="/admin/v2/brokers", tags=["brokers"], route_class=SluiceRoute)
DRY_RUN = Query(False, alias="dryRun", description="validate and report, change nothing")
DRY_RUN_ANSWER: dict[int | str, dict] = {
    200: {"model": BrokerDryRun, "description": "dryRun=true: the limits of every topic"}
}


@router.get("/configuration")
async def list_dynamic_config() -> list[str]:
    """Names of the configuration keys that can be changed at runtime."""
    return service.dynamic_names()


@router.get("/configuration/values")
async def get_all_dynamic_config(uow: UowDep) -> dict[str, str]:
    """Values overridden through this API."""
    return await service.overrides(uow)


@router.get("/configuration/runtime")
async def get_runtime_config(uow: UowDep) -> dict[str, str]:
    """Every configuration key with the value in force."""
    return await service.runtime(uow)


async def _answer(uow: UowDep) -> Response:
    """204, or for a dry run 200 with the would-be limits of every topic."""
    return await write_answer(uow, lambda: provenance_for(uow.session))


@router.post("/configuration/{name}/{value}", status_code=204, responses=DRY_RUN_ANSWER)
async def update_dynamic_config(
    name: str, value: str, uow: UowDep, dry_run: bool = DRY_RUN
) -> Response:
    """Override a dynamic configuration key."""
    await service.set_override(uow, name, value)
    return await _answer(uow)


@router.delete("/configuration/{name}", status_code=204, responses=DRY_RUN_ANSWER)
async def delete_dynamic_config(name: str, uow: UowDep, dry_run: bool = DRY_RUN) -> Response:
    """Reset a dynamic configuration key to its default."""
    await service.delete_override(uow, name)
    return await _answer(uow)


@router.get("/health", response_class=PlainTextResponse)
async def health() -> str:
    """Liveness: the process answers."""
    return "ok"


READY_CHECK_SECONDS = 2.0  # each readiness check gives up after this long
LABELS = {"database": "the database", "redis": "Redis"}


@router.get(
    "/ready",
    response_model=ReadyChecks,
    responses={503: {"model": NotReady, "description": "the database or Redis does not answer"}},
)
async def ready(state: StateDep) -> Response:
    """Readiness: the database and Redis both answer (each check bounded by
    ``READY_CHECK_SECONDS``, so a probe with a 4 s timeout always gets an answer)."""

    async def database() -> None:
        await service.database_answers(state.engine)

    async def redis() -> None:
        await state.redis.ping()

    names = ("database", "redis")
    results = await asyncio.gather(
        *(asyncio.wait_for(check(), READY_CHECK_SECONDS) for check in (database, redis)),
        return_exceptions=True,
    )
    checks = {
        name: "ok" if result is None else f"unavailable: {_failure(result)}"
        for name, result in zip(names, results, strict=True)
    }
    down = [LABELS[name] for name in names if checks[name] != "ok"]
    if not down:
        return JsonResponse(checks)
    verb = "does" if len(down) == 1 else "do"
    reason = f"Not ready: {' and '.join(down)} {verb} not answer"
    return JsonResponse({**checks, "reason": reason}, status_code=503)


def _failure(exc: BaseException) -> str:
    return "timeout" if isinstance(exc, TimeoutError) else type(exc).__name__


@router.get("/{cluster}")
async def list_brokers(cluster: str, state: StateDep) -> list[str]:
    """The live workers of the cluster (Pulsar's active brokers), by id."""
    return [w["id"] for w in await _workers(cluster, state)]


@router.get("/{cluster}/workers", response_model=list[WorkerDocument])
async def list_workers(cluster: str, state: StateDep) -> list[dict]:
    """The live workers with how to reach them and how many partitions each owns."""
    return await _workers(cluster, state)


async def _workers(cluster: str, state: StateDep) -> list[dict]:
    if check_cluster(cluster) != state.settings.cluster_name:
        raise NotFound(f"Cluster {cluster} does not exist")
    return await live_workers(state.redis)
