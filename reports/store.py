"""Report runs and results in the control-plane database.

A run is recorded before it computes anything: ``queue`` records it ``queued`` (the admin
service does the same when a run is requested), ``start`` marks an attempt ``running``.  Its
result rows carry its id; marking it succeeded and deleting the rows it supersedes (older
runs' rows for the same windows) happen in one transaction, so readers see either the old
results or the new ones, never a mix.
A failed attempt's rows are deleted and the run is marked failed with its error, or queued
again with it when the attempt will be retried.

Results are written by Spark over JDBC (the PostgreSQL driver, in parallel from the
executors) when the database is PostgreSQL, or collected and inserted through SQLAlchemy
otherwise (SQLite in standalone).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pyspark.sql import DataFrame
from sqlalchemy import Engine, delete, func, insert, select, update
from sqlalchemy.engine import make_url

from models.base import utcnow
from models.db import is_sqlite
from models.reports import (
    REPORT_TABLES,
    RUN_FAILED,
    RUN_FINAL,
    RUN_QUEUED,
    RUN_RUNNING,
    RUN_SUCCEEDED,
    ReportRun,
    queued_run,
    report_columns,
)

INSERT_BATCH = 5_000


class RunStore:
    """Records runs and stores their results."""

    def __init__(self, engine: Engine, database_url: str, jdbc_jar: str | None = None) -> None:
        self.engine = engine
        self.database_url = database_url
        self.use_jdbc = not is_sqlite(database_url) and bool(jdbc_jar)

    def queue(
        self, jobs: Sequence[str], *, task_id: str | None, params: dict[str, Any]
    ) -> dict[str, int]:
        """Record a queued run of each job (in one transaction); their ids by job."""
        with self.engine.begin() as connection:
            return {
                job: connection.execute(
                    insert(ReportRun)
                    .values(queued_run(job, task_id=task_id, params=params))
                    .returning(ReportRun.id)
                ).scalar_one()
                for job in jobs
            }

    def pending(self, run_ids: Mapping[str, int]) -> dict[str, int]:
        """The runs of ``run_ids`` (job -> id) that have not ended, in the same order."""
        with self.engine.connect() as connection:
            ended = set(
                connection.scalars(
                    select(ReportRun.id).where(
                        ReportRun.id.in_(list(run_ids.values())), ReportRun.status.in_(RUN_FINAL)
                    )
                )
            )
        return {job: run_id for job, run_id in run_ids.items() if run_id not in ended}

    def status(self, run_id: int) -> tuple[str, int]:
        """A run's status and its number of attempts."""
        with self.engine.connect() as connection:
            row = connection.execute(
                select(ReportRun.status, ReportRun.attempt).where(ReportRun.id == run_id)
            ).one()
        return row.status, row.attempt

    def start(
        self,
        job: str,
        window_from: datetime,
        window_to: datetime,
        *,
        params: dict[str, Any],
        attempt: int = 1,
        run_id: int | None = None,
    ) -> tuple[int, int]:
        """Mark an attempt running; its run id and attempt number.

        With ``run_id``, the next attempt of that recorded run (``params`` are added to its
        own); without, a new run recorded as running with ``attempt``.
        """
        now = utcnow()
        with self.engine.begin() as connection:
            if run_id is None:
                # Recorded as queued and started at once.
                values = queued_run(job, task_id=None, params=params)
                values.update(status=RUN_RUNNING, queued_at=now, started_at=now, attempt=attempt)
                values.update(window_from=window_from, window_to=window_to)
                new_id = connection.execute(
                    insert(ReportRun).values(values).returning(ReportRun.id)
                ).scalar_one()
                return new_id, attempt
            run = connection.execute(
                select(ReportRun.job, ReportRun.attempt, ReportRun.params)
                .where(ReportRun.id == run_id)
                .with_for_update()
            ).one_or_none()
            if run is None or run.job != job:
                raise LookupError(f"no {job} report run {run_id}")
            attempt = run.attempt + 1
            connection.execute(
                update(ReportRun)
                .where(ReportRun.id == run_id)
                .values(
                    status=RUN_RUNNING,
                    started_at=now,
                    finished_at=None,
                    window_from=window_from,
                    window_to=window_to,
                    attempt=attempt,
                    params={**(run.params or {}), **params},
                )
            )
        return run_id, attempt

    def write(self, job: str, run_id: int, frame: DataFrame) -> None:
        """Write a run's result rows."""
        frame = frame.select(*report_columns(job))
        table = REPORT_TABLES[job].__table__
        if self.use_jdbc:
            url, properties = jdbc_target(self.database_url)
            frame.write.jdbc(url, table.name, mode="append", properties=properties)
            return
        with self.engine.begin() as connection:
            batch = []
            for row in frame.toLocalIterator():
                batch.append(row.asDict())
                if len(batch) >= INSERT_BATCH:
                    connection.execute(insert(table), batch)
                    batch = []
            if batch:
                connection.execute(insert(table), batch)

    def succeed(self, job: str, run_id: int, windows: dict[str, datetime]) -> int:
        """Publish a run's results: mark it succeeded and drop what it supersedes.

        ``windows`` maps each window kind to the earliest window start the run recomputed.
        Returns the number of result rows.
        """
        model = REPORT_TABLES[job]
        with self.engine.begin() as connection:
            rows = connection.execute(
                select(func.count()).select_from(model).where(model.run_id == run_id)
            ).scalar_one()
            for window, since in windows.items():
                connection.execute(
                    delete(model).where(
                        model.run_id < run_id,
                        model.window == window,
                        model.window_start >= since,
                    )
                )
            connection.execute(
                update(ReportRun)
                .where(ReportRun.id == run_id)
                .values(status=RUN_SUCCEEDED, finished_at=utcnow(), rows=rows, error=None)
            )
        return rows

    def fail(self, job: str, run_id: int, error: str, *, requeue: bool = False) -> None:
        """Delete a run's rows and record why its attempt failed: the run is failed, or
        queued again when ``requeue`` (another attempt will follow)."""
        model = REPORT_TABLES[job]
        with self.engine.begin() as connection:
            connection.execute(delete(model).where(model.run_id == run_id))
            connection.execute(
                update(ReportRun)
                .where(ReportRun.id == run_id)
                .values(
                    status=RUN_QUEUED if requeue else RUN_FAILED,
                    finished_at=None if requeue else utcnow(),
                    error=error[:4000],
                    rows=0,
                )
            )


def jdbc_target(database_url: str) -> tuple[str, dict[str, str]]:
    """The JDBC URL and connection properties of a PostgreSQL SQLAlchemy URL."""
    url = make_url(database_url)
    host = url.host or "127.0.0.1"
    port = url.port or 5432
    properties = {
        "driver": "org.postgresql.Driver",
        "user": url.username or "postgres",
        "batchsize": "10000",
    }
    if url.password:
        properties["password"] = url.password
    # Connection options such as sslmode or sslrootcert carry over to the JDBC driver.
    properties.update({k: v for k, v in url.query.items() if isinstance(v, str)})
    jdbc = f"jdbc:postgresql://{host}:{port}/{url.database}?reWriteBatchedInserts=true"
    return jdbc, properties
