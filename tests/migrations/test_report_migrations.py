"""The report migrations keep the rows already written: renamed columns keep their values,
new ones are null until a run recomputes the window."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import MetaData, Table, insert, text

from migrations import downgrade, upgrade
from models.db import make_sync_engine
from tests.migrations.test_migrations import empty_url  # noqa: F401  (the fixture)

BEFORE_LIMITS = "0003"
BEFORE_QUEUE = "0004_report_limits"
WINDOW = {
    "run_id": 1,
    "window": "minute",
    "window_start": datetime(2026, 11, 23, 10, 0, tzinfo=UTC),
    "tenant": "acme",
    "namespace": "orders",
    "topic": "persistent://acme/orders/created",
    "subscription": "sub",
    "intervals": 6,
}


def _insert(connection, table: str, values: dict) -> None:
    """Insert into ``table`` as the database has it now (not as the models describe it)."""
    connection.execute(insert(Table(table, MetaData(), autoload_with=connection)), values)


def test_the_limit_of_old_rows_becomes_the_limit_at_the_end(empty_url):  # noqa: F811
    upgrade(empty_url, BEFORE_LIMITS)
    engine = make_sync_engine(empty_url)
    try:
        with engine.begin() as connection:
            _insert(
                connection,
                "rate_report",
                {
                    **WINDOW,
                    "msg_out": 6000,
                    "bytes_out": 0,
                    "avg_rate": 100.0,
                    "peak_rate": 100.0,
                    "p50_rate": 100.0,
                    "p95_rate": 100.0,
                    "avg_byte_rate": 0.0,
                    "limit_msg_per_s": 400.0,
                    "limit_byte_per_s": 5000.0,
                    "utilisation": 0.9,
                    "throttled_share": 0.0,
                    "throttled_broker_share": 0.0,
                    "throttled_topic_share": 0.0,
                    "throttled_subscription_share": 0.0,
                },
            )
            _insert(
                connection,
                "backlog_report",
                {
                    **WINDOW,
                    "backlog_msgs": 10,
                    "backlog_bytes": 100,
                    "max_backlog_msgs": 10,
                    "growth_per_s": 0.0,
                    "publish_rate": 1.0,
                    "dispatch_rate": 1.0,
                    "limit_msg_per_s": 400.0,
                    "drain_status": "draining",
                    "growth_rank": 1,
                },
            )
        upgrade(empty_url)
        with engine.connect() as connection:
            rate = connection.execute(text("SELECT * FROM rate_report")).mappings().one()
            backlog = connection.execute(text("SELECT * FROM backlog_report")).mappings().one()
        assert (rate["limit_topic_at_end"], rate["byte_limit_topic_at_end"]) == (400.0, 5000.0)
        assert (rate["utilisation"], rate["msg_out"]) == (0.9, 6000)
        assert [rate["limit_topic_avg"], rate["limited_share"], rate["partitions"]] == [None] * 3
        assert backlog["limit_topic_at_end"] == 400.0
        downgrade(empty_url, BEFORE_LIMITS)
        with engine.connect() as connection:
            rate = connection.execute(text("SELECT * FROM rate_report")).mappings().one()
            backlog = connection.execute(text("SELECT * FROM backlog_report")).mappings().one()
        assert (rate["limit_msg_per_s"], rate["limit_byte_per_s"]) == (400.0, 5000.0)
        assert "limit_topic_avg" not in rate
        assert backlog["limit_msg_per_s"] == 400.0
    finally:
        engine.dispose()


def test_runs_recorded_before_the_queue_were_queued_when_they_started(empty_url):  # noqa: F811
    upgrade(empty_url, BEFORE_QUEUE)
    engine = make_sync_engine(empty_url)
    started = datetime(2026, 11, 24, 8, 0, tzinfo=UTC)
    try:
        with engine.begin() as connection:
            _insert(
                connection,
                "report_runs",
                {
                    "job": "rates",
                    "status": "succeeded",
                    "started_at": started,
                    "rows": 3,
                    "attempt": 1,
                    "params": {},
                },
            )
        upgrade(empty_url)
        with engine.begin() as connection:
            run = connection.execute(text("SELECT * FROM report_runs")).mappings().one()
            assert (run["task_id"], run["status"], run["rows"]) == (None, "succeeded", 3)
            assert _utc(run["queued_at"]) == _utc(run["started_at"]) == started
            # From now on a queued run has not started.
            _insert(
                connection,
                "report_runs",
                {
                    "job": "backlog",
                    "status": "queued",
                    "task_id": "t-1",
                    "queued_at": started,
                    "rows": 0,
                    "attempt": 0,
                    "params": {},
                },
            )
        downgrade(empty_url, BEFORE_QUEUE)
        with engine.connect() as connection:
            runs = connection.execute(text("SELECT * FROM report_runs ORDER BY id")).mappings()
            assert [(r["job"], _utc(r["started_at"])) for r in runs] == [
                ("rates", started),
                ("backlog", started),
            ]
    finally:
        engine.dispose()


def _utc(moment: datetime | str) -> datetime:
    """A timestamp as read back raw (SQLite: naive text) as an aware UTC datetime."""
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
