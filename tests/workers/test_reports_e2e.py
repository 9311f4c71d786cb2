"""Reporting end to end: real traffic through a worker under a limit, stats landed, every
job run (the Celery task's body), the report read over REST."""

from __future__ import annotations

import time

import pytest

import sluice
from reports.tasks import run_reports_once
from tests.workers.conftest import ADMIN, drain, rate

TOPIC = "persistent://acme/orders/created"
LIMIT = 100


@pytest.fixture
def report_settings(worker_settings, tmp_path):
    return worker_settings.model_copy(
        update={
            "lake_path": str(tmp_path / "lake"),
            "report_windows": "minute,hour",
            "report_lookback_seconds": 600,
        }
    )


def test_utilisation_against_the_limit_set_over_rest(
    http, namespace, worker, client, spark, report_settings
):
    assert http.put(f"{ADMIN}/persistent/acme/orders/created").status_code == 204
    assert (
        http.post(f"{ADMIN}/namespaces/acme/orders/dispatchRate", json=rate(LIMIT)).status_code
        == 204
    )
    consumer = client.subscribe(TOPIC, "sub", consumer_type=sluice.ConsumerType.Shared)
    producer = client.create_producer(TOPIC, batching_enabled=False, block_if_queue_full=True)
    for _ in range(1500):
        producer.send_async(b"x" * 100, None)
    producer.flush()
    # About 6 s at the limit; the backlog stays deep the whole time.
    got = drain(consumer, 600, timeout=8)
    assert len(got) >= 400
    time.sleep(1.2)  # the worker's last stats interval

    results = run_reports_once(report_settings)
    assert [(r["job"], r["rows"] > 0) for r in results] == [
        ("rates", True),
        ("backlog", True),
        ("advice", True),
    ]

    rows = http.get(f"{ADMIN}/reports/rates/acme/orders", params={"window": "hour"}).json()
    [row] = [r for r in rows if r["subscription"] == "sub"]
    assert row["topic"] == TOPIC
    # One partition, one limit the whole time: every limit figure is the namespace's rate.
    assert row["partitions"] == 1 and row["limitedShare"] == 1.0
    limits = ("limitPerPartitionMin", "limitTopicMin", "limitTopicMax", "limitTopicAtEnd")
    assert [row[name] for name in limits] == [LIMIT] * 4
    averages = (row["limitPerPartitionAvg"], row["limitTopicAvg"])
    assert averages == pytest.approx((LIMIT, LIMIT), rel=1e-12)
    assert row["allowedMsgs"] == pytest.approx(LIMIT * row["msgOut"] / row["avgRate"])
    assert row["limitLimiter"] == "topic" and row["limitSource"] == "namespace"
    # Delivered / allowed over the seconds the stats intervals covered. The limiter hands out
    # each period's quota at the period's start and a period may exceed its limit by one entry,
    # so a span of S seconds that is not aligned with the periods touches up to S + 1 of them:
    # at most (LIMIT + 1) * (S + 1) messages. The lower bound allows for the first and last
    # partial seconds, when the consumer had not started or had stopped draining.
    seconds = row["msgOut"] / row["avgRate"]
    assert seconds >= 4, row
    ceiling = (LIMIT + 1) * (seconds + 1) / (LIMIT * seconds)
    assert 0.7 <= row["utilisation"] <= ceiling, (row, ceiling)
    # A stats interval is about 1 s but not aligned with the limiter's periods: a late tick can
    # span the starts of two periods, so one interval may show up to twice the limit.
    assert row["peakRate"] <= (LIMIT + 1) * 2
    assert row["throttledBy"] == "topic"

    backlog = http.get(f"{ADMIN}/reports/backlog/acme/orders", params={"window": "hour"}).json()
    [entry] = [b for b in backlog if b["subscription"] == "sub"]
    assert entry["backlogMsgs"] >= 1500 - len(got) - 50
    assert entry["drainStatus"] in ("draining", "never")

    runs = http.get(f"{ADMIN}/reports/runs").json()
    assert {r["job"] for r in runs} == {"rates", "backlog", "advice"}
    assert {r["status"] for r in runs} == {"succeeded"}

    chart = http.get(
        f"{ADMIN}/reports/charts/acme/orders/created",
        params={"subscription": "sub", "window": "minute"},
    )
    assert chart.status_code == 200 and chart.headers["content-type"] == "image/png"
    assert chart.content.startswith(b"\x89PNG")
