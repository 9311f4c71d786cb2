"""Celery tasks: land stats, and run the report jobs with a time budget, retries and history.

``sluice.land_stats`` moves snapshots from Redis into the lake.  ``sluice.run_reports`` lands
first, then runs each job over the last ``SLUICE_REPORT_LOOKBACK_SECONDS``; every attempt is
recorded in ``report_runs`` (start, end, status, rows, error).  A failed attempt leaves no
results behind and is retried with exponential backoff (30 s doubling, at most 10 min, with
jitter) up to ``SLUICE_REPORT_RETRIES`` times.  One report run at a time: a run that finds
another in progress skips.
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
from models.settings import Settings
from reports.jobs import JOBS, run_job
from reports.lake import land
from reports.store import RunStore

log = logging.getLogger(__name__)
RUN_LOCK_KEY = "sluice:reports:run-lock"


def _settings() -> Settings:
    from reports.celery_app import app

    return app.conf.sluice_settings


@cache
def _redis(url: str) -> redis_lib.Redis:
    return redis_lib.Redis.from_url(url)


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


def run_reports_once(
    settings: Settings,
    jobs: list[str] | None = None,
    lookback_seconds: float | None = None,
    attempt: int = 1,
) -> list[dict]:
    """Land, then run the report jobs once (the body of ``sluice.run_reports``)."""
    from reports.session import spark_session

    client = _redis(settings.effective_redis_url)
    token = uuid.uuid4().hex
    budget = settings.report_time_budget_seconds
    if not client.set(RUN_LOCK_KEY, token, nx=True, ex=int(budget * len(JOBS)) + 60):
        log.info("report run skipped: another run is in progress")
        return []
    try:
        try:
            land_once(settings)
        except RuntimeError as exc:  # a landing in progress: report on what is landed
            log.info("landing skipped: %s", exc)
        until = datetime.now(UTC)
        since = until - timedelta(seconds=lookback_seconds or settings.report_lookback_seconds)
        spark = spark_session(settings)
        store = _store(settings.effective_database_url, settings.jdbc_jar)
        results = []
        for job in jobs or JOBS:
            result = run_job(
                spark,
                store,
                settings.effective_lake_path,
                job,
                since=since,
                until=until,
                windows=settings.report_window_list,
                budget_seconds=budget,
                attempt=attempt,
            )
            results.append(
                {
                    "job": job,
                    "runId": result.run_id,
                    "rows": result.rows,
                    "seconds": round(result.seconds, 3),
                }
            )
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
def run_reports(self, jobs: list[str] | None = None, lookback_seconds: float | None = None):
    """Run the report jobs; retry a failure with backoff."""
    settings = _settings()
    try:
        return run_reports_once(settings, jobs, lookback_seconds, attempt=self.request.retries + 1)
    except Exception as exc:
        if self.request.retries >= settings.report_retries:
            raise
        log.warning("report run failed (%s); retrying", exc)
        raise self.retry(exc=exc, countdown=retry_countdown(self.request.retries)) from exc
