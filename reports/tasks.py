"""Celery tasks: land stats, and run the report jobs with a time budget, retries and history.

``sluice.land_stats`` moves snapshots from Redis into the lake.  ``sluice.run_reports`` first
asks the workers for the stats interval so far (``reports.freshness``), lands, then runs each
job over the last ``SLUICE_REPORT_LOOKBACK_SECONDS``; each run records up to when its data
reaches (``dataUntil`` in its params).  Every run is a
row of ``report_runs``, one per job, that goes ``queued`` -> ``running`` -> ``succeeded`` or
``failed``: a run requested over REST is recorded as queued before the task is sent, and the
task gets the rows' ids (``run_ids``); a scheduled run records its rows when it starts.

A failed attempt leaves no results behind; while the run has attempts left
(``SLUICE_REPORT_RETRIES`` retries) it goes back to ``queued`` with the error and the task is
retried with exponential backoff (30 s doubling, at most 10 min, with jitter), for the jobs
that have not succeeded.  One report run at a time: a scheduled run that finds another in
progress skips; a requested one waits for it (the task is retried every ~15 s, its runs stay
queued).

A scheduled run follows traffic: when nothing was landed since the last complete run (every
job, the default lookback) read the lake, it skips (``skip_unchanged``, which the beat's entry
sets from ``SLUICE_REPORT_SKIP_UNCHANGED``): no Spark, no run rows, a line in the log.  Quiet
partitions report no snapshots, so a platform of idle tenants costs no report runs; the
first snapshot landed brings them back at the next scheduled turn.
"""

from __future__ import annotations

import logging
import random
import uuid
from datetime import UTC, datetime, timedelta
from functools import cache

import redis as redis_lib
from celery import shared_task

from models.db import make_sync_engine
from models.reports import RUN_QUEUED, SPAN_JOBS
from models.settings import Settings
from reports.freshness import request_snapshots
from reports.jobs import JOBS, run_job
from reports.lake import CHECKPOINT_KEY, land
from reports.store import RunStore
from sluice.protocol.connection import connect

log = logging.getLogger(__name__)
RUN_LOCK_KEY = "sluice:reports:run-lock"
LOCK_WAIT_SECONDS = 15.0  # how often a requested run checks whether the run lock is free
# The landing checkpoint (the last landed stream id) the last complete run read up to.
REPORTED_KEY = "sluice:reports:reported"
NOTHING_LANDED = b"0-0"


class RunLockBusy(RuntimeError):
    """Another report run holds the run lock."""


class ReportJobsFailed(RuntimeError):
    """Some jobs of a run failed.  ``run_ids`` are every job's run (job -> id); ``retry`` is
    the latest attempt number of the runs queued again for another attempt (None: none).
    (The message alone rebuilds it, as Celery's result backend does.)"""

    def __init__(
        self, message: str, run_ids: dict[str, int] | None = None, retry: int | None = None
    ) -> None:
        super().__init__(message)
        self.run_ids = run_ids or {}
        self.retry = retry


def _settings() -> Settings:
    from reports.celery_app import app

    return app.conf.sluice_settings


@cache
def _redis(url: str) -> redis_lib.Redis:
    return connect(url)


@cache
def _store(database_url: str, jdbc_jar: str) -> RunStore:
    return RunStore(make_sync_engine(database_url), database_url, jdbc_jar)


def retry_countdown(retries: int) -> float:
    """Seconds before retry number ``retries + 1``: 30 s doubling, capped at 600 s, ±20 %."""
    base = min(600.0, 30.0 * 2**retries)
    return base * random.uniform(0.8, 1.2)


def land_once(settings: Settings) -> dict:
    """Land the stats stream into the lake (the body of ``sluice.land_stats``)."""
    result = land(_redis(settings.effective_redis_url), settings.effective_lake_path)
    return {"rows": result.rows, "files": result.files, "checkpoint": result.checkpoint}


def _since(
    settings: Settings, job: str, since: datetime, until: datetime, lookback: float | None
) -> datetime:
    """Where a job's run starts: a span job (the advice) looks back over its own span unless
    the run names a lookback."""
    if job in SPAN_JOBS and lookback is None:
        return until - timedelta(seconds=settings.report_advice_lookback_seconds)
    return since


def _land_up_to_now(settings: Settings, client: redis_lib.Redis) -> tuple[datetime, bytes]:
    """Have the workers snapshot the interval so far, land: up to when the data reaches, and
    the landing checkpoint (the last landed snapshot's stream id)."""
    # What the workers measured until now, not only until their last stats interval.
    data_until = request_snapshots(client, settings.report_snapshot_wait_seconds)
    try:
        land_once(settings)
    except RuntimeError as exc:  # a landing in progress: report on what is landed
        log.info("landing skipped: %s", exc)
    return data_until, client.get(CHECKPOINT_KEY) or NOTHING_LANDED


def _unchanged(client: redis_lib.Redis, landed: bytes) -> bool:
    """Whether the last complete run read the lake up to ``landed`` already."""
    if landed != (client.get(REPORTED_KEY) or NOTHING_LANDED):
        return False
    log.info("report run skipped: nothing landed since the last run (%s)", landed.decode())
    return True


def run_reports_once(
    settings: Settings,
    jobs: list[str] | None = None,
    lookback_seconds: float | None = None,
    run_ids: dict[str, int] | None = None,
    task_id: str | None = None,
    skip_unchanged: bool = False,
) -> list[dict]:
    """Land, then run the report jobs once (the body of ``sluice.run_reports``).

    ``run_ids`` (job -> id) are runs recorded as queued; without them the runs of ``jobs``
    are recorded now.  Runs that have ended already are left alone.  Raises ``RunLockBusy``
    when another run is in progress and ``run_ids`` wait (without, there is nothing to run),
    ``ReportJobsFailed`` when a job failed (the others ran).  With ``skip_unchanged`` (a
    scheduled run) and nothing landed since the last complete run, nothing runs.
    """
    from reports.session import spark_session

    client = _redis(settings.effective_redis_url)
    token = uuid.uuid4().hex
    budget = settings.report_time_budget_seconds
    if not client.set(RUN_LOCK_KEY, token, nx=True, ex=int(budget * len(JOBS)) + 60):
        if run_ids:
            raise RunLockBusy("another report run is in progress")
        log.info("report run skipped: another run is in progress")
        return []
    try:
        data_until, landed = _land_up_to_now(settings, client)
        complete = jobs is None and lookback_seconds is None
        if skip_unchanged and run_ids is None and complete and _unchanged(client, landed):
            return []
        until = datetime.now(UTC)
        since = until - timedelta(seconds=lookback_seconds or settings.report_lookback_seconds)
        spark = spark_session(settings)
        store = _store(settings.effective_database_url, settings.jdbc_jar)
        if run_ids is None:
            params = {"trigger": "scheduled", "lookbackSeconds": lookback_seconds}
            run_ids = store.queue(jobs or JOBS, task_id=task_id, params=params)
        results, errors = [], {}
        for job, run_id in store.pending(run_ids).items():
            try:
                result = run_job(
                    spark,
                    store,
                    settings.effective_lake_path,
                    job,
                    since=_since(settings, job, since, until, lookback_seconds),
                    until=until,
                    windows=settings.report_window_list,
                    budget_seconds=budget,
                    run_id=run_id,
                    max_attempts=settings.report_retries + 1,
                    data_until=data_until,
                )
            except Exception as exc:
                errors[job] = str(exc) or type(exc).__name__
                continue
            results.append(
                {
                    "job": job,
                    "runId": result.run_id,
                    "rows": result.rows,
                    "seconds": round(result.seconds, 3),
                    "attempt": result.attempt,
                    "dataUntil": data_until.isoformat(),
                }
            )
        if errors:
            states = [store.status(run_ids[job]) for job in errors]
            queued = [attempt for status, attempt in states if status == RUN_QUEUED]
            message = "; ".join(f"{job}: {error}" for job, error in errors.items())
            raise ReportJobsFailed(message, run_ids, max(queued) if queued else None)
        if complete:
            client.set(REPORTED_KEY, landed)
        return results
    finally:
        if client.get(RUN_LOCK_KEY) == token.encode():
            client.delete(RUN_LOCK_KEY)


@shared_task(name="sluice.land_stats", ignore_result=True)
def land_stats() -> dict:
    """Land stats snapshots into the lake."""
    try:
        return land_once(_settings())
    except RuntimeError as exc:
        log.info("landing skipped: %s", exc)
        return {"rows": 0, "files": 0, "skipped": str(exc)}


@shared_task(bind=True, name="sluice.run_reports", max_retries=None)
def run_reports(
    self,
    jobs: list[str] | None = None,
    lookback_seconds: float | None = None,
    run_ids: dict[str, int] | None = None,
    skip_unchanged: bool = False,
):
    """Run the report jobs; retry a failure with backoff, and wait for a run in progress.
    ``skip_unchanged``: the schedule's runs skip while nothing new was landed."""
    settings = _settings()
    try:
        return run_reports_once(
            settings, jobs, lookback_seconds, run_ids, self.request.id, skip_unchanged
        )
    except RunLockBusy as exc:
        raise self.retry(exc=exc, countdown=LOCK_WAIT_SECONDS * random.uniform(0.8, 1.2)) from exc
    except ReportJobsFailed as exc:
        if exc.retry is None:
            raise
        log.warning("report run failed (%s); retrying", exc)
        kwargs = {"jobs": jobs, "lookback_seconds": lookback_seconds, "run_ids": exc.run_ids}
        raise self.retry(exc=exc, countdown=retry_countdown(exc.retry - 1), kwargs=kwargs) from exc
    except Exception as exc:  # no job ran: Spark, the lake or the database out of reach
        if self.request.retries >= settings.report_retries:
            raise
        log.warning("report run failed (%s); retrying", exc)
        raise self.retry(exc=exc, countdown=retry_countdown(self.request.retries)) from exc
