"""The ``advice`` job on a real lake, SparkSession and PostgreSQL: one run, its rows, and the
advice the admin service makes of them (``api.reports.advice_service``)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select

from api.reports.advice_service import subscription_advice
from models.reports import AdviceReportRow, ReportRun
from models.settings import Settings
from reports.jobs import run_job
from reports.store import RunStore
from tests.conftest import truncate
from tests.reports.conftest import LIMITED, T0, TOPIC, at_the_limit, snap, write_lake

PARTED = "persistent://acme/orders/parted"
N = 12  # two minutes of 10 s intervals


def _snapshots():
    rows = []
    # Throttled all along at 100 msg/s while 120 msg/s come in.
    slow = at_the_limit(
        N, 1200, 200, 20_000, subscription="slow", unacked=50, consumers=1, throttled_topic=2
    )
    for i in range(N):
        t = 10 * (i + 1)
        # 12 msg/s under a 100 msg/s limit, nothing waits.
        rows.append(snap(t, "idle", msg_in=120, msg_out=120, consumers=1, **LIMITED))
        rows.append(slow[i])
        # No limit; the consumers acknowledge 40 msg/s while 50 msg/s come in.
        rows.append(
            snap(
                t,
                "capped",
                msg_in=500,
                msg_out=400,
                backlog_msgs=100 * (i + 1),
                unacked=10,
                consumers=2,
            )
        )
        # Two partitions, 100 msg/s each, both throttled.
        for partition in (0, 1):
            rows.append(
                snap(
                    t,
                    "p",
                    topic=PARTED,
                    partition=partition,
                    msg_in=600,
                    msg_out=500,
                    backlog_msgs=100 * (i + 1),
                    consumers=1,
                    throttled_topic=1,
                    **LIMITED,
                )
            )
    return rows


@pytest.fixture
def rows(spark, database_url, db, tmp_path) -> dict[str, AdviceReportRow]:
    truncate(db)
    store = RunStore(db, database_url, Settings().jdbc_jar)
    lake = write_lake(tmp_path / "lake", _snapshots())
    options = {"windows": ("minute",), "budget_seconds": 300}
    run_job(spark, store, lake, "advice", since=T0, until=T0 + timedelta(hours=1), **options)
    second = run_job(
        spark, store, lake, "advice", since=T0, until=T0 + timedelta(hours=1), **options
    )
    with db.connect() as connection:
        runs = connection.execute(select(ReportRun.status)).scalars().all()
        found = connection.execute(select(AdviceReportRow)).all()
    assert runs == ["succeeded", "succeeded"]
    # The newest run replaces every earlier one's rows.
    assert {r.run_id for r in found} == {second.run_id} and second.rows == 4
    return {r.subscription: r for r in found}


def test_advice_rows_and_what_the_service_makes_of_them(rows):
    idle, slow, capped, parted = rows["idle"], rows["slow"], rows["capped"], rows["p"]
    assert (idle.window, idle.window_start, idle.intervals, idle.span_seconds) == (
        "span",
        T0,
        N,
        120.0,
    )
    assert (idle.throttled_share, idle.peak_utilisation) == (0.0, pytest.approx(0.12))
    assert (idle.limit_limiter, idle.limit_source, idle.limited_share) == (
        "topic",
        "namespace",
        1.0,
    )
    said = subscription_advice(idle, None)
    assert [f["text"] for f in said["findings"]] == [
        "limit never reached in 2 min (peak 12% of it)"
    ]

    assert (slow.publish_rate_p95, slow.throttled_share, slow.backlog_msgs) == (120.0, 1.0, 2400)
    assert slow.growth_per_s == pytest.approx(20.0) and slow.capacity is None
    said = subscription_advice(slow, None)
    arithmetic = said["recommendation"]
    assert (arithmetic["targetSeconds"], arithmetic["needed"]) == (
        3600,
        pytest.approx(120 + 2400 / 3600),
    )
    assert arithmetic["perPartition"] == 121
    assert said["apply"]["path"] == "/admin/v2/namespaces/acme/orders/dispatchRate"
    assert said["apply"]["body"]["dispatchThrottlingRateInMsg"] == 121
    assert [f["code"] for f in said["findings"]] == ["throttledBacklogGrowing"]

    # Acknowledged per interval: 500 in - 100 more waiting = 400, i.e. 40 msg/s.
    assert (capped.capacity, capped.capacity_intervals) == (pytest.approx(40.0), N - 1)
    said = subscription_advice(capped, None)
    assert said["recommendation"]["recommended"] == pytest.approx(40.0)
    assert said["recommendation"]["cappedByCapacity"] and said["apply"] is None

    # Partitions add up; the recommendation is per partition.
    assert (parted.partitions, parted.limit_topic_at_end, parted.limit_per_partition_at_end) == (
        2,
        200.0,
        100.0,
    )
    assert (parted.publish_rate_p95, parted.backlog_msgs) == (120.0, 2400)
    assert subscription_advice(parted, None)["recommendation"]["perPartition"] == 61


def test_the_simulator_reads_recorded_traffic_from_the_lake(tmp_path):
    from api.reports.recorded import _lake_rows, intervals_of

    lake = write_lake(tmp_path / "lake", _snapshots(), batch=7)
    rows = _lake_rows(lake, "acme", "orders", T0, T0 + timedelta(seconds=60))
    recorded = intervals_of(rows)
    assert set(recorded) == {
        (TOPIC, "idle"),
        (TOPIC, "slow"),
        (TOPIC, "capped"),
        (PARTED, "p"),
    }
    # [T0, T0 + 60 s): the intervals ending at 10 .. 50 s; partitions summed.
    parted = recorded[(PARTED, "p")]
    assert [(i.partitions, i.published, i.backlog) for i in parted] == [
        (2, 1200, 200 * (n + 1)) for n in range(5)
    ]
    assert all(i.throttled for i in parted)
    assert _lake_rows(str(tmp_path / "none"), "acme", "orders", T0, T0) == []
    assert _lake_rows(lake, "acme", "other", T0, T0 + timedelta(hours=1)) == []
