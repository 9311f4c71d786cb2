"""The report jobs end to end on a real lake, SparkSession and database (PostgreSQL over
JDBC, and SQLite through SQLAlchemy)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import orjson
import pytest
from sqlalchemy import select

from migrations import upgrade
from models.db import make_sync_engine
from models.reports import BacklogReportRow, RateReportRow, ReportRun
from models.settings import Settings
from reports.jobs import TimeBudgetExceeded, run_job
from reports.store import RunStore
from tests.conftest import truncate
from tests.reports.conftest import T0, at_the_limit, write_lake

JDBC_JAR = Settings().jdbc_jar


@pytest.fixture
def lake(tmp_path) -> str:
    # One minute at the limit (100 msg/s) for subscription "sub", growing backlog.
    return write_lake(tmp_path / "lake", at_the_limit(6, 1200, 200, throttled_topic=2))


@pytest.fixture
def store(database_url, db) -> RunStore:
    truncate(db)
    return RunStore(db, database_url, JDBC_JAR)


def _run(spark, store, lake, job, **kw):
    options = {
        "since": T0,
        "until": T0 + timedelta(hours=1),
        "windows": ("minute", "hour"),
        "budget_seconds": 300,
    }
    options.update(kw)
    return run_job(spark, store, lake, job, **options)


def test_rate_job_writes_over_jdbc_and_records_the_run(spark, store, lake, db):
    assert store.use_jdbc
    result = _run(spark, store, lake, "rates")
    assert result.rows == 2
    with db.connect() as connection:
        run = connection.execute(select(ReportRun)).one()
        rows = connection.execute(select(RateReportRow).order_by(RateReportRow.window)).all()
    assert (run.job, run.status, run.rows, run.error) == ("rates", "succeeded", 2, None)
    assert [(r.window, r.window_start, r.run_id) for r in rows] == [
        ("hour", T0, run.id),
        ("minute", T0, run.id),
    ]
    minute = rows[1]
    assert (minute.avg_rate, minute.limit_topic_avg, minute.utilisation) == (100.0, 100.0, 1.0)
    assert (minute.limit_per_partition_avg, minute.limit_topic_at_end) == (100.0, 100.0)
    assert (minute.throttled_share, minute.throttled_by) == (1.0, "topic")


def test_a_rerun_replaces_the_results_of_the_same_windows(spark, store, lake, db):
    first = _run(spark, store, lake, "backlog")
    second = _run(spark, store, lake, "backlog")
    with db.connect() as connection:
        rows = connection.execute(select(BacklogReportRow)).all()
    assert {r.run_id for r in rows} == {second.run_id} != {first.run_id}
    assert len(rows) == 2
    minute = next(r for r in rows if r.window == "minute")
    assert (minute.backlog_msgs, minute.drain_status) == (1200, "never")
    assert minute.growth_per_s == pytest.approx(20.0)


def test_a_run_over_its_time_budget_fails_and_leaves_no_rows(spark, store, lake, db):
    with pytest.raises(TimeBudgetExceeded):
        _run(spark, store, lake, "rates", budget_seconds=0.01)
    with db.connect() as connection:
        run = connection.execute(select(ReportRun)).one()
        count = len(connection.execute(select(RateReportRow)).all())
    assert (run.status, count) == ("failed", 0)
    assert "time budget" in run.error


def test_empty_lake_succeeds_with_no_rows(spark, store, tmp_path):
    result = _run(spark, store, str(tmp_path / "nothing-here"), "rates")
    assert result.rows == 0


def test_bad_parameters(spark, store, lake):
    with pytest.raises(ValueError, match="unknown report job"):
        _run(spark, store, lake, "latency")
    with pytest.raises(ValueError, match="bad report windows"):
        _run(spark, store, lake, "rates", windows=("fortnight",))


def test_sqlite_results_go_through_sqlalchemy(spark, lake, tmp_path):
    url = f"sqlite:///{tmp_path / 'sluice.db'}"
    upgrade(url)
    engine = make_sync_engine(url)
    sqlite_store = RunStore(engine, url, JDBC_JAR)
    assert not sqlite_store.use_jdbc
    assert _run(spark, sqlite_store, lake, "rates").rows == 2
    with engine.connect() as connection:
        windows = sorted(r.window for r in connection.execute(select(RateReportRow)).all())
    assert windows == ["hour", "minute"]
    engine.dispose()


def test_priority_levels_reach_the_database_over_jdbc(spark, store, tmp_path, db):
    """A run whose snapshots carry priorities writes them per level (JSON text) with the rest
    of each row."""
    rows = [
        replace(s, priority_levels='{"9": [150, 0], "2": [50, 10]}')
        for s in at_the_limit(6, 1200, 200)
    ]
    lake = write_lake(tmp_path / "lake", rows)
    for job in ("rates", "backlog"):
        assert _run(spark, store, lake, job, windows=("minute",)).rows == 1
    with db.connect() as connection:
        rate = connection.execute(select(RateReportRow)).one()
        backlog = connection.execute(select(BacklogReportRow)).one()
    assert orjson.loads(rate.priority_levels) == {
        "9": {"msgOut": 900, "avgRate": 15.0},
        "2": {"msgOut": 300, "avgRate": 5.0},
    }
    assert orjson.loads(backlog.priority_levels) == {"2": {"msgBacklog": 10}}
