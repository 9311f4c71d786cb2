"""Routes of ``/admin/v2/reports``: rate and backlog reports, runs, charts."""

from __future__ import annotations

import asyncio
import uuid
from typing import Annotated

from fastapi import Body, Path, Query
from starlette.responses import HTMLResponse, Response

from api.deps import CallerDep, StateDep, UowDep
from api.reports import service
from api.reports.schemas import (
    BacklogReportDocument,
    QueuedRun,
    RateReportDocument,
    RunDocument,
    RunRequest,
)
from api.routing import SluiceRoute, SluiceRouter
from api.unit_of_work import committed
from models.errors import InvalidInput, Unavailable
from models.json_body import INT64_MAX, shown
from models.reports import REPORT_JOBS as JOBS
from sluice.protocol.names import TopicName, check_subscription

router = SluiceRouter(prefix="/admin/v2/reports", tags=["reports"], route_class=SluiceRoute)


def _topic(tenant: str, namespace: str, topic: str | None) -> str | None:
    """The full name of a topic filter (412 when it is not a valid topic name)."""
    if not topic:
        return topic
    if "://" in topic:
        return TopicName.from_full(topic).full
    return TopicName.parse(tenant, namespace, topic).full


def _query(
    tenant: str,
    namespace: str,
    window: str,
    since: str,
    topic: str | None,
    subscription: str | None,
) -> dict:
    """The filters of a report query, checked: the window, the moment ``since`` names, the
    topic's full name, the subscription."""
    return {
        "window": window,
        "since": service.since_moment(since),
        "topic": _topic(tenant, namespace, topic),
        "subscription": check_subscription(subscription) if subscription is not None else None,
    }


# The query parameters both report listings take.
Window = Annotated[str, Query(description="minute, hour or day")]
Since = Annotated[str, Query(description="a duration back from now (1h) or ISO-8601 time")]
RowLimit = Annotated[int, Query(ge=1, le=100_000)]


@router.get("/rates/{tenant}/{namespace}", response_model=list[RateReportDocument])
async def rate_report(
    tenant: str,
    namespace: str,
    uow: UowDep,
    window: Window = "minute",
    since: Since = "1h",
    topic: str | None = Query(None, description="topic name or persistent:// URL"),
    subscription: str | None = None,
    limit: RowLimit = 1000,
) -> list[dict]:
    """Dispatch per subscription per window against the limit in force."""
    query = _query(tenant, namespace, window, since, topic, subscription)
    return await service.report_rows(uow, "rates", tenant, namespace, **query, limit=limit)


@router.get("/backlog/{tenant}/{namespace}", response_model=list[BacklogReportDocument])
async def backlog_report(
    tenant: str,
    namespace: str,
    uow: UowDep,
    window: Window = "minute",
    since: Since = "1h",
    topic: str | None = None,
    subscription: str | None = None,
    top: int | None = Query(
        None, ge=1, le=100_000, description="only the N fastest-growing per window"
    ),
    limit: RowLimit = 1000,
) -> list[dict]:
    """Backlog per subscription per window, its growth and time to drain."""
    query = _query(tenant, namespace, window, since, topic, subscription)
    return await service.report_rows(
        uow, "backlog", tenant, namespace, **query, top=top, limit=limit
    )


@router.get("/runs", response_model=list[RunDocument])
async def list_runs(
    uow: UowDep,
    job: str | None = Query(None, description="rates or backlog"),
    status: str | None = Query(None, description="queued, running, succeeded or failed"),
    taskId: str | None = Query(None, description="only the runs of this task"),
    limit: int = Query(50, ge=1, le=1000),
) -> list[dict]:
    """Report runs, newest first."""
    return await service.list_runs(uow, job=job, status=status, limit=limit, task_id=taskId)


@router.get("/runs/{run_id}", response_model=RunDocument)
async def get_run(run_id: Annotated[int, Path(ge=1, le=INT64_MAX)], uow: UowDep) -> dict:
    """One report run."""
    return await service.get_run(uow, run_id)


@router.post("/runs", status_code=202, response_model=QueuedRun)
async def start_run(
    state: StateDep, caller: CallerDep, body: RunRequest | None = Body(None)
) -> dict:
    """Queue a report run now: ``{"jobs": ["rates", "backlog"], "lookbackSeconds": 3600}``.

    Answers the runs recorded for it, one per job, ``queued``; a worker marks them
    ``running``, then ``succeeded`` or ``failed``."""
    body = body or RunRequest()
    jobs = body.jobs or list(JOBS)
    unknown = [j for j in jobs if j not in JOBS]
    if unknown:
        raise InvalidInput(
            f"Invalid jobs: {shown(unknown[0])} is not a job; use a list of {', '.join(JOBS)}"
        )
    lookback = body.lookbackSeconds
    # One run per job, recorded as queued before the task goes out, so it can be followed
    # (GET /runs/{id}) whether or not a worker ever takes it.
    jobs = list(dict.fromkeys(jobs))
    task_id = str(uuid.uuid4())
    async with committed(state.sessions, caller) as uow:
        runs = await service.queue_runs(uow, jobs, lookback, task_id)
    run_ids = {run.job: run.id for run in runs}
    try:
        await state.reports.send(jobs, lookback, run_ids=run_ids, task_id=task_id)
    except Exception as exc:
        reason = f"Cannot queue the report run: {exc}"
        async with committed(state.sessions, caller) as uow:
            await service.fail_queued(uow, list(run_ids.values()), reason)
        raise Unavailable(reason) from exc
    documents = [service.run_json(run) for run in runs]
    return {"taskId": task_id, "jobs": jobs, "runIds": list(run_ids.values()), "runs": documents}


@router.get(
    "/charts/{tenant}/{namespace}/{topic}",
    response_class=Response,
    responses={200: {"content": {"image/png": {}, "text/html": {}}, "description": "the chart"}},
)
async def chart(
    tenant: str,
    namespace: str,
    topic: str,
    uow: UowDep,
    subscription: str = Query(..., description="the subscription to draw"),
    window: str = Query("minute"),
    since: str = Query("1h"),
    format: str = Query("png", description="png or html"),
) -> Response:
    """Dispatch rate against the limit, and backlog, over time."""
    if format not in ("png", "html"):
        raise InvalidInput(f"Invalid format '{format}': use png or html")
    query = _query(tenant, namespace, window, since, topic, subscription)
    name = query["topic"]
    rates = await service.report_rows(uow, "rates", tenant, namespace, **query)
    backlog = await service.report_rows(uow, "backlog", tenant, namespace, **query)
    from reports import charts

    title = f"{name} / {subscription} ({window})"
    if format == "html":
        return HTMLResponse(await asyncio.to_thread(charts.render_html, title, rates, backlog))
    png = await asyncio.to_thread(charts.render_png, title, rates, backlog)
    return Response(png, media_type="image/png")
