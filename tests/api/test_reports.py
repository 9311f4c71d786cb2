"""``/admin/v2/reports`` over HTTP: only succeeded, newest results; runs; queueing; charts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import redis
from sqlalchemy import insert

from models.reports import BacklogReportRow, RateReportRow, ReportRun
from reports.celery_app import QUEUE

ADMIN = "/admin/v2"
TOPIC = "persistent://acme/orders/created"
NOW = datetime.now(UTC).replace(second=0, microsecond=0)


def rate_row(run_id: int, minutes_ago: int, subscription: str = "sub", **values) -> dict:
    row = {
        "run_id": run_id,
        "window": "minute",
        "window_start": NOW - timedelta(minutes=minutes_ago),
        "tenant": "acme",
        "namespace": "orders",
        "topic": TOPIC,
        "subscription": subscription,
        "intervals": 6,
        "partitions": 4,
        "msg_out": 6000,
        "bytes_out": 600_000,
        "avg_rate": 100.0,
        "peak_rate": 100.0,
        "p50_rate": 100.0,
        "p95_rate": 100.0,
        "avg_byte_rate": 10_000.0,
        "limit_per_partition_avg": 25.0,
        "limit_per_partition_min": 25.0,
        "limit_per_partition_max": 25.0,
        "limit_topic_avg": 100.0,
        "limit_topic_min": 100.0,
        "limit_topic_max": 100.0,
        "limit_topic_at_end": 100.0,
        "limited_share": 1.0,
        "allowed_msgs": 6000.0,
        "byte_limit_per_partition_avg": None,
        "byte_limit_per_partition_min": None,
        "byte_limit_per_partition_max": None,
        "byte_limit_topic_avg": None,
        "byte_limit_topic_min": None,
        "byte_limit_topic_max": None,
        "byte_limit_topic_at_end": None,
        "byte_limited_share": 0.0,
        "allowed_bytes": None,
        "limit_limiter": "topic",
        "limit_source": "namespace",
        "utilisation": 1.0,
        "throttled_share": 1.0,
        "throttled_broker_share": 0.0,
        "throttled_topic_share": 1.0,
        "throttled_subscription_share": 0.0,
        "throttled_by": "topic",
    }
    row.update(values)
    return row


def backlog_row(run_id: int, subscription: str, growth: float, rank: int) -> dict:
    return {
        "run_id": run_id,
        "window": "minute",
        "window_start": NOW - timedelta(minutes=1),
        "tenant": "acme",
        "namespace": "orders",
        "topic": TOPIC,
        "subscription": subscription,
        "intervals": 6,
        "backlog_msgs": 500,
        "backlog_bytes": 5000,
        "max_backlog_msgs": 500,
        "growth_per_s": growth,
        "publish_rate": 10.0,
        "dispatch_rate": 5.0,
        "limit_topic_at_end": None,
        "drain_rate": -5.0,
        "drain_seconds": None,
        "drain_status": "never",
        "growth_rank": rank,
    }


@pytest.fixture
def reports(http, db):
    """Namespace acme/orders with runs 1 (succeeded, superseded for one window), 2 (failed,
    rows left behind) and 3 (succeeded, newest)."""
    assert (
        http.put(f"{ADMIN}/tenants/acme", json={"allowedClusters": ["standalone"]}).status_code
        == 204
    )
    assert http.put(f"{ADMIN}/namespaces/acme/orders").status_code == 204
    with db.begin() as connection:
        for run_id, status in ((1, "succeeded"), (2, "failed"), (3, "succeeded")):
            connection.execute(
                insert(ReportRun).values(
                    id=run_id,
                    job="rates",
                    status=status,
                    started_at=NOW,
                    rows=0,
                    attempt=1,
                    params={},
                    error="boom" if status == "failed" else None,
                )
            )
        connection.execute(
            insert(RateReportRow),
            [
                rate_row(1, 2, avg_rate=10.0),
                rate_row(1, 1, avg_rate=11.0),  # superseded by run 3
                rate_row(2, 1, avg_rate=99.0),  # failed run: never shown
                rate_row(3, 1, avg_rate=12.0),
                rate_row(3, 1, subscription="other", avg_rate=13.0),
                rate_row(3, 180, avg_rate=14.0),  # three hours ago
            ],
        )
        connection.execute(
            insert(BacklogReportRow),
            [
                backlog_row(3, "fast", 9.0, 1),
                backlog_row(3, "slow", 1.0, 2),
                backlog_row(3, "shrinking", -1.0, 3),
            ],
        )
    return http


def test_rates_are_the_newest_succeeded_results(reports):
    rows = reports.get(f"{ADMIN}/reports/rates/acme/orders", params={"since": "1h"}).json()
    assert [(r["subscription"], r["avgRate"]) for r in rows] == [
        ("sub", 10.0),
        ("other", 13.0),
        ("sub", 12.0),
    ]
    first = rows[0]
    assert first["topic"] == TOPIC and first["partitions"] == 4
    assert (first["limitTopicAvg"], first["limitPerPartitionAvg"]) == (100.0, 25.0)
    assert (first["limitedShare"], first["allowedMsgs"], first["byteLimitTopicAvg"]) == (
        1.0,
        6000.0,
        None,
    )
    assert first["throttledBy"] == "topic" and first["window"] == "minute"
    assert datetime.fromisoformat(first["windowStart"]) == NOW - timedelta(minutes=2)


def test_filters(reports):
    url = f"{ADMIN}/reports/rates/acme/orders"
    assert len(reports.get(url, params={"since": "4h"}).json()) == 4
    assert [r["avgRate"] for r in reports.get(url, params={"subscription": "other"}).json()] == [
        13.0
    ]
    assert len(reports.get(url, params={"topic": "created"}).json()) == 3
    assert reports.get(url, params={"topic": "persistent://acme/orders/x"}).json() == []
    assert reports.get(url, params={"window": "day"}).json() == []
    since = (NOW - timedelta(minutes=1)).isoformat()
    assert len(reports.get(url, params={"since": since}).json()) == 2


def test_top_growing_backlogs(reports):
    url = f"{ADMIN}/reports/backlog/acme/orders"
    assert [r["subscription"] for r in reports.get(url).json()] == ["fast", "shrinking", "slow"]
    top = reports.get(url, params={"top": 5}).json()
    assert [(r["subscription"], r["growthRank"]) for r in top] == [("fast", 1), ("slow", 2)]
    assert top[0]["drainStatus"] == "never" and top[0]["drainSeconds"] is None


@pytest.mark.parametrize(
    ("params", "reason"),
    [
        ({"window": "week"}, "Invalid window"),
        ({"since": "yesterday"}, "Invalid since"),
        ({"since": "-5m"}, "Invalid since"),
    ],
)
def test_bad_parameters_get_a_reason(reports, params, reason):
    answer = reports.get(f"{ADMIN}/reports/rates/acme/orders", params=params)
    assert answer.status_code == 400
    assert reason in answer.json()["reason"]


def test_unknown_namespace(http):
    answer = http.get(f"{ADMIN}/reports/rates/acme/nope")
    assert answer.status_code == 404
    assert "does not exist" in answer.json()["reason"]


def test_run_history(reports):
    runs = reports.get(f"{ADMIN}/reports/runs").json()
    assert [(r["id"], r["status"]) for r in runs] == [
        (3, "succeeded"),
        (2, "failed"),
        (1, "succeeded"),
    ]
    failed = reports.get(f"{ADMIN}/reports/runs", params={"status": "failed"}).json()
    assert [(r["id"], r["error"]) for r in failed] == [(2, "boom")]
    assert reports.get(f"{ADMIN}/reports/runs/2").json()["job"] == "rates"
    missing = reports.get(f"{ADMIN}/reports/runs/99")
    assert missing.status_code == 404 and "99" in missing.json()["reason"]
    assert reports.get(f"{ADMIN}/reports/runs", params={"status": "odd"}).status_code == 400


def test_queue_a_run(http, redis_server):
    answer = http.post(f"{ADMIN}/reports/runs", json={"jobs": ["rates"], "lookbackSeconds": 600})
    assert answer.status_code == 202
    assert answer.json()["taskId"]
    queued = redis.Redis.from_url(redis_server.url).llen(QUEUE)
    assert queued == 1
    bad = http.post(f"{ADMIN}/reports/runs", json={"jobs": ["nope"]})
    assert bad.status_code == 400 and "Invalid jobs" in bad.json()["reason"]
    bad = http.post(f"{ADMIN}/reports/runs", json={"lookbackSeconds": "1h"})
    assert bad.status_code == 400


def test_html_chart(reports):
    page = reports.get(
        f"{ADMIN}/reports/charts/acme/orders/created",
        params={"subscription": "sub", "format": "html"},
    )
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "data:image/png;base64," in page.text and "<td>topic</td>" in page.text
    # The topic's time-weighted limit, then the partition's.
    assert "<td>100</td><td>25</td>" in page.text
    bad = reports.get(
        f"{ADMIN}/reports/charts/acme/orders/created",
        params={"subscription": "sub", "format": "svg"},
    )
    assert bad.status_code == 400
