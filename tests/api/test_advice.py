"""``GET /admin/v2/reports/advice`` over HTTP: the latest advice run's rows, the arithmetic
with the drain target each topic resolves to now, where to apply it (and that applying it
through the ordinary write, dry run first, works), and the ``backlogDrainTargetSeconds``
policy itself."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import insert

from models.reports import AdviceReportRow, ReportRun

ADMIN = "/admin/v2"
NS = f"{ADMIN}/namespaces/acme/orders"
TOPIC = "persistent://acme/orders/created"
NOW = datetime.now(UTC).replace(microsecond=0)


def advice_row(run_id: int, subscription: str, **values) -> dict:
    row = {
        "run_id": run_id,
        "window": "span",
        "window_start": NOW - timedelta(days=7),
        "tenant": "acme",
        "namespace": "orders",
        "topic": TOPIC,
        "subscription": subscription,
        "span_end": NOW,
        "intervals": 60480,
        "span_seconds": 604800.0,
        "partitions": 4,
        "publish_rate_avg": 80.0,
        "publish_rate_p95": 100.0,
        "dispatch_rate_avg": 80.0,
        "dispatch_rate_peak": 400.0,
        "limit_topic_at_end": 400.0,
        "limit_per_partition_at_end": 100.0,
        "limit_limiter": "topic",
        "limit_source": "namespace",
        "limited_share": 1.0,
        "throttled_share": 0.41,
        "throttled_seconds": 247968.0,
        "peak_utilisation": 1.0,
        "backlog_msgs": 36_000,
        "backlog_bytes": 3_600_000,
        "backlog_avg": 30_000.0,
        "max_backlog_msgs": 36_000,
        "growth_per_s": 0.25,
        "capacity": None,
        "capacity_intervals": 0,
        "ack_rate_peak": 90.0,
        "consumers": 2,
    }
    row.update(values)
    return row


@pytest.fixture
def advised(http, db):
    """acme/orders/created with advice runs 1 (old) and 2 (newest) and a failed run 3."""
    assert (
        http.put(f"{ADMIN}/tenants/acme", json={"allowedClusters": ["standalone"]}).status_code
        == 204
    )
    assert http.put(NS).status_code == 204
    assert http.put(f"{ADMIN}/persistent/acme/orders/created").status_code == 204
    with db.begin() as connection:
        for run_id, status in ((1, "succeeded"), (2, "succeeded"), (3, "failed")):
            connection.execute(
                insert(ReportRun).values(
                    id=run_id, job="advice", status=status, started_at=NOW, attempt=1, params={}
                )
            )
        connection.execute(
            insert(AdviceReportRow),
            [
                advice_row(1, "old", publish_rate_p95=1.0),
                advice_row(2, "slow"),
                advice_row(2, "idle", throttled_share=0.0, peak_utilisation=0.12, growth_per_s=0.0),
                advice_row(3, "failed"),
            ],
        )
    return http


def test_advice_of_the_newest_run_with_its_arithmetic(advised):
    answer = advised.get(f"{ADMIN}/reports/advice/acme/orders")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["runId"] == 2
    subs = {s["subscription"]: s for s in body["subscriptions"]}
    assert set(subs) == {"slow", "idle"}
    arithmetic = subs["slow"]["recommendation"]
    assert arithmetic == {
        "publishRateP95": 100.0,
        "backlogMsgs": 36_000,
        "targetSeconds": 3600,
        "targetSource": "broker",
        "capacity": None,
        "needed": 110.0,
        "recommended": 110.0,
        "partitions": 4,
        "perPartition": 28,
        "cappedByCapacity": False,
        "formula": arithmetic["formula"],
    }
    assert [f["code"] for f in subs["slow"]["findings"]] == ["throttledBacklogGrowing"]
    assert subs["idle"]["findings"][0]["text"] == "limit never reached in 7 days (peak 12% of it)"
    # One namespace limit binds both: the higher of their figures.
    assert body["limits"] == [
        {
            "level": "namespace",
            "kind": "dispatchRate",
            "path": f"{NS}/dispatchRate",
            "currentPerPartition": 100.0,
            "perPartition": 28,
            "subscriptions": [f"{TOPIC}/idle", f"{TOPIC}/slow"],
            "body": subs["slow"]["apply"]["body"],
        }
    ]
    topic = advised.get(f"{ADMIN}/reports/advice/acme/orders/created").json()
    assert len(topic["subscriptions"]) == 2
    assert advised.get(f"{ADMIN}/reports/advice/acme/orders/other").json()["subscriptions"] == []


def test_the_drain_target_policy_changes_the_advice_at_once(advised):
    assert advised.post(f"{NS}/backlogDrainTargetSeconds", json=600).status_code == 204
    topic_path = f"{ADMIN}/persistent/acme/orders/created/backlogDrainTargetSeconds"
    assert advised.post(topic_path, json=360).status_code == 204
    assert advised.get(f"{NS}/backlogDrainTargetSeconds").json() == 600
    assert advised.get(topic_path, params={"applied": "true"}).json() == 360
    body = advised.get(f"{ADMIN}/reports/advice/acme/orders").json()
    slow = next(s for s in body["subscriptions"] if s["subscription"] == "slow")
    assert slow["recommendation"]["targetSeconds"] == 360
    assert slow["recommendation"]["targetSource"] == "topic"
    assert slow["recommendation"]["needed"] == 100 + 36_000 / 360
    assert slow["recommendation"]["perPartition"] == 50


@pytest.mark.parametrize(("value", "status"), [(0, 412), (-5, 412), (1.5, 400), ("1h", 400)])
def test_a_bad_drain_target_is_refused_and_changes_nothing(advised, value, status):
    answer = advised.post(f"{NS}/backlogDrainTargetSeconds", json=value)
    assert answer.status_code == status and "reason" in answer.json()
    assert advised.get(f"{NS}/backlogDrainTargetSeconds").json() is None


def test_a_recommendation_applies_through_the_ordinary_write(advised):
    limit = advised.get(f"{ADMIN}/reports/advice/acme/orders").json()["limits"][0]
    preview = advised.post(limit["path"], params={"dryRun": "true"}, json=limit["body"])
    assert preview.status_code == 200 and preview.json()["dryRun"] is True
    assert advised.get(limit["path"]).json() is None
    assert advised.post(limit["path"], json=limit["body"]).status_code == 204
    assert advised.get(limit["path"]).json()["dispatchThrottlingRateInMsg"] == 28


def test_unknown_namespace_and_no_run_yet(http):
    assert http.get(f"{ADMIN}/reports/advice/acme/none").status_code == 404
    assert (
        http.put(f"{ADMIN}/tenants/acme", json={"allowedClusters": ["standalone"]}).status_code
        == 204
    )
    assert http.put(NS).status_code == 204
    empty = http.get(f"{ADMIN}/reports/advice/acme/orders").json()
    assert (empty["runId"], empty["subscriptions"], empty["limits"]) == (None, [], [])


SIMULATE = {"tenant": "acme", "namespace": "orders", "dispatchThrottlingRateInMsg": 10}


@pytest.mark.parametrize(
    ("body", "status", "reason"),
    [
        ({"level": "topic", "since": "1h"}, 400, "needs a topic"),
        ({"level": "subscription", "topic": "created", "since": "1h"}, 400, "subscription"),
        ({"level": "cluster", "since": "1h"}, 400, "level"),
        ({"since": "yesterday"}, 400, "Invalid since"),
        ({"since": "1h", "until": "2h"}, 400, "until must be after since"),
        ({"since": "1h", "namespace": "none"}, 404, "Namespace does not exist"),
        ({"since": "1h", "dispatchThrottlingRateInMsg": "10"}, 400, ""),
        ({"since": "1h", "typo": 1}, 400, "typo"),
    ],
)
def test_a_bad_simulation_request_gets_a_reason(advised, body, status, reason):
    answer = advised.post(f"{ADMIN}/reports/simulate", json={**SIMULATE, **body})
    assert answer.status_code == status, answer.text
    assert reason in answer.json()["reason"]


def test_a_window_without_recorded_traffic_simulates_nothing(advised):
    answer = advised.post(f"{ADMIN}/reports/simulate", json={**SIMULATE, "since": "10m"})
    assert answer.status_code == 200
    body = answer.json()
    assert (body["level"], body["subscriptions"]) == ("namespace", [])
