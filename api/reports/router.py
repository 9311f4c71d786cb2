"""Routes of ``/admin/v2/reports``: rate and backlog reports, runs, charts."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Body, Query
from starlette.responses import HTMLResponse, Response

from api.deps import StateDep, UowDep
from api.reports import service
from api.reports.schemas import (
    BacklogReportDocument,
    QueuedRun,
    RateReportDocument,
    RunDocument,
)
from api.routing import SluiceRoute
from models.errors import InvalidInput, Unavailable
from models.reports import REPORT_JOBS as JOBS

router = APIRouter(prefix="/admin/v2/reports", tags=["reports"], route_class=SluiceRoute)


def _topic(tenant: str, namespace: str, topic: str | None) -> str | None:
    if not topic or "://" in topic:
        return topic
    return f"persistent://{tenant}/{namespace}/{topic}"


@router.get("/rates/{tenant}/{namespace}", response_model=list[RateReportDocument])
async def rate_report(
    tenant: str,
    namespace: str,
    uow: UowDep,
    window: str = Query("minute", description="minute, hour or day"),
    since: str = Query("1h", description="a duration back from now (1h) or ISO-8601 time"),
    topic: str | None = Query(None, description="topic name or persistent:// URL"),
    subscription: str | None = None,
    limit: int = Query(1000, ge=1, le=100_000),
) -> list[dict]:
    """Dispatch per subscription per window against the limit in force."""
    return await service.report_rows(
        uow.session,
        "rates",
        tenant,
        namespace,
        window=window,
        since=service.since_moment(since),
        topic=_topic(tenant, namespace, topic),
        subscription=subscription,
        limit=limit,
    )


@router.get("/backlog/{tenant}/{namespace}", response_model=list[BacklogReportDocument])
async def backlog_report(
    tenant: str,
    namespace: str,
    uow: UowDep,
    window: str = Query("minute", description="minute, hour or day"),
    since: str = Query("1h", description="a duration back from now (1h) or ISO-8601 time"),
    topic: str | None = None,
    subscription: str | None = None,
    top: int | None = Query(None, ge=1, description="only the N fastest-growing per window"),
    limit: int = Query(1000, ge=1, le=100_000),
) -> list[dict]:
    """Backlog per subscription per window, its growth and time to drain."""
    return await service.report_rows(
        uow.session,
        "backlog",
        tenant,
        namespace,
        window=window,
        since=service.since_moment(since),
        topic=_topic(tenant, namespace, topic),
        subscription=subscription,
        top=top,
        limit=limit,
    )


@router.get("/runs", response_model=list[RunDocument])
async def list_runs(
    uow: UowDep,
    job: str | None = Query(None, description="rates or backlog"),
    status: str | None = Query(None, description="running, succeeded or failed"),
    limit: int = Query(50, ge=1, le=1000),
) -> list[dict]:
    """Report runs, newest first."""
    return await service.list_runs(uow.session, job=job, status=status, limit=limit)


@router.get("/runs/{run_id}", response_model=RunDocument)
async def get_run(run_id: int, uow: UowDep) -> dict:
    """One report run."""
    return await service.get_run(uow.session, run_id)


@router.post("/runs", status_code=202, response_model=QueuedRun)
async def start_run(state: StateDep, body: dict | None = Body(None)) -> dict:
    """Queue a report run now: ``{"jobs": ["rates", "backlog"], "lookbackSeconds": 3600}``."""
    body = body or {}
    jobs = body.get("jobs") or list(JOBS)
    lookback = body.get("lookbackSeconds")
    if not isinstance(jobs, list) or any(j not in JOBS for j in jobs):
        raise InvalidInput(f"Invalid jobs {jobs!r}: use a list of {', '.join(JOBS)}")
    if lookback is not None and (
        isinstance(lookback, bool) or not isinstance(lookback, int | float) or lookback <= 0
    ):
        raise InvalidInput("Invalid lookbackSeconds: must be a positive number")
    try:
        task_id = await state.reports.send(jobs, lookback)
    except Exception as exc:
        raise Unavailable(f"Cannot queue the report run: {exc}") from exc
    return {"taskId": task_id, "jobs": jobs}


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
    moment = service.since_moment(since)
    name = _topic(tenant, namespace, topic)
    query = {"window": window, "since": moment, "topic": name, "subscription": subscription}
    rates = await service.report_rows(uow.session, "rates", tenant, namespace, **query)
    backlog = await service.report_rows(uow.session, "backlog", tenant, namespace, **query)
    from reports import charts

    title = f"{name} / {subscription} ({window})"
    if format == "html":
        return HTMLResponse(await asyncio.to_thread(charts.render_html, title, rates, backlog))
    png = await asyncio.to_thread(charts.render_png, title, rates, backlog)
    return Response(png, media_type="image/png")
