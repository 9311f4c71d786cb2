"""Queries behind ``/admin/v2/reports``: the latest succeeded results and the run history.

Only rows of succeeded runs are ever returned; if two succeeded runs cover the same window
(a run superseded another but both were kept), the newer run's row wins.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from sqlalchemy import func, select, update

from api.unit_of_work import UnitOfWork
from models.base import utcnow
from models.durations import parse_duration
from models.errors import InvalidInput, NotFound
from models.json_body import shown
from models.reports import (
    REPORT_TABLES,
    RUN_FAILED,
    RUN_QUEUED,
    RUN_STATUSES,
    RUN_SUCCEEDED,
    WINDOWS,
    ReportRun,
    queued_run,
    report_columns,
)
from models.repository import get_namespace


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def row_json(row: Any, columns: list[str]) -> dict:
    """A result row as JSON (camelCase keys, ISO-8601 times)."""
    out = {}
    for name in columns:
        value = getattr(row, name)
        if isinstance(value, datetime):
            value = value.isoformat()
        elif name == "priority_levels" and value is not None:
            value = orjson.loads(value)  # stored as JSON text (written by Spark over JDBC)
        out[_camel(name)] = value
    return out


def run_json(run: ReportRun) -> dict:
    """A run as JSON."""
    return {
        "id": run.id,
        "job": run.job,
        "status": run.status,
        "taskId": run.task_id,
        "queuedAt": run.queued_at.isoformat(),
        "startedAt": run.started_at.isoformat() if run.started_at else None,
        "finishedAt": run.finished_at.isoformat() if run.finished_at else None,
        "windowFrom": run.window_from.isoformat() if run.window_from else None,
        "windowTo": run.window_to.isoformat() if run.window_to else None,
        "dataUntil": (run.params or {}).get("dataUntil"),
        "rows": run.rows,
        "attempt": run.attempt,
        "error": run.error,
        "params": run.params,
    }


def since_moment(since: str, now: datetime | None = None) -> datetime:
    """``since`` as a moment: a duration back from now (``1h``) or an ISO-8601 time."""
    now = now or datetime.now(UTC)
    try:
        return now - timedelta(seconds=parse_duration(since))
    except OverflowError:  # before year 1, or not even a finite number of seconds
        return datetime.min.replace(tzinfo=UTC)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(since)
    except ValueError:
        raise InvalidInput(
            f"Invalid since {shown(since)}: use a duration like 1h or an ISO-8601 time"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def check_window(window: str) -> str:
    """Validate a window name."""
    if window not in WINDOWS:
        raise InvalidInput(f"Invalid window '{window}': use one of {', '.join(WINDOWS)}")
    return window


async def report_rows(
    uow: UnitOfWork,
    job: str,
    tenant: str,
    namespace: str,
    *,
    window: str,
    since: datetime,
    topic: str | None = None,
    subscription: str | None = None,
    top: int | None = None,
    limit: int = 1000,
) -> list[dict]:
    """The latest succeeded results of ``job`` for a namespace, oldest window first."""
    await get_namespace(uow.session, tenant, namespace)
    model = REPORT_TABLES[job]
    newest = (
        func.row_number()
        .over(
            partition_by=(model.topic, model.subscription, model.window_start),
            order_by=model.run_id.desc(),
        )
        .label("newest")
    )
    inner = (
        select(model, newest)
        .join(ReportRun, ReportRun.id == model.run_id)
        .where(
            ReportRun.status == RUN_SUCCEEDED,
            model.tenant == tenant,
            model.namespace == namespace,
            model.window == check_window(window),
            model.window_start >= since,
        )
    )
    if topic:
        inner = inner.where(model.topic == topic)
    if subscription:
        inner = inner.where(model.subscription == subscription)
    if top is not None and job == "backlog":
        inner = inner.where(model.growth_rank <= top, model.growth_per_s > 0)
    latest = inner.subquery()
    query = (
        select(latest)
        .where(latest.c.newest == 1)
        .order_by(latest.c.window_start, latest.c.topic, latest.c.subscription)
        .limit(limit)
    )
    columns = report_columns(job)
    return [row_json(row, columns) for row in (await uow.session.execute(query)).all()]


async def list_runs(
    uow: UnitOfWork,
    *,
    job: str | None,
    status: str | None,
    limit: int,
    task_id: str | None = None,
) -> list[dict]:
    """Runs, newest first."""
    query = select(ReportRun).order_by(ReportRun.id.desc()).limit(limit)
    if job:
        query = query.where(ReportRun.job == job)
    if status:
        if status not in RUN_STATUSES:
            raise InvalidInput(f"Invalid status '{status}': use {', '.join(RUN_STATUSES)}")
        query = query.where(ReportRun.status == status)
    if task_id:
        query = query.where(ReportRun.task_id == task_id)
    return [run_json(run) for run in (await uow.session.scalars(query)).all()]


async def get_run(uow: UnitOfWork, run_id: int) -> dict:
    """One run."""
    run = await uow.session.get(ReportRun, run_id)
    if run is None:
        raise NotFound(f"Report run {run_id} does not exist")
    return run_json(run)


async def queue_runs(
    uow: UnitOfWork, jobs: list[str], lookback: float | None, task_id: str
) -> list[ReportRun]:
    """Record a queued run of each job (ids assigned); the caller's unit of work commits
    them before the task that runs them is sent (a worker may take it at once)."""
    params = {"trigger": "requested", "lookbackSeconds": lookback}
    runs = [ReportRun(**queued_run(job, task_id=task_id, params=params)) for job in jobs]
    uow.session.add_all(runs)
    await uow.session.flush()
    return runs


async def fail_queued(uow: UnitOfWork, run_ids: list[int], error: str) -> None:
    """Mark runs that could not be queued as failed (those no worker has taken)."""
    await uow.session.execute(
        update(ReportRun)
        .where(ReportRun.id.in_(run_ids), ReportRun.status == RUN_QUEUED)
        .values(status=RUN_FAILED, finished_at=utcnow(), error=error[:4000])
    )
