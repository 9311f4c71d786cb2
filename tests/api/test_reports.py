"""``/admin/v2/reports`` over HTTP: only succeeded, newest results; runs followed from queued
to succeeded or failed; queueing; charts."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest
import redis
from sqlalchemy import insert

from api.reports.queue import ReportQueue
from models.reports import BacklogReportRow, RateReportRow, ReportRun
from reports.celery_app import QUEUE
from server.embedded_redis import free_port
from tests.reports.task_settings import task_settings_for

ADMIN = "/admin/v2"
TOPIC = "persistent://acme/orders/created"
NOW = datetime.now(UTC).replace(second=0, microsecond=0)


def run_row(run_id: int, job: str, status: str, error: str, **values):
    """The insert of report run ``run_id`` started at ``NOW``, attempted once; ``error`` is
    its error if it failed."""
    return insert(ReportRun).values(
        id=run_id,
        job=job,
        status=status,
        started_at=NOW,
        attempt=1,
        params={},
        error=error if status == "failed" else None,
        **values,
    )


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
            connection.execute(run_row(run_id, "rates", status, "boom", rows=0))
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


def test_priority_levels_are_objects(reports, db):
    """Per-priority figures, stored as JSON text, are answered as objects; a subscription
    that saw no priority has null."""
    levels = '{"9": {"msgOut": 60, "avgRate": 1.0}, "0": {"msgOut": 6, "avgRate": 0.1}}'
    with db.begin() as connection:
        connection.execute(
            insert(RateReportRow), [rate_row(3, 1, subscription="urgent", priority_levels=levels)]
        )
        backlog = backlog_row(3, "urgent", 0.5, 4) | {"priority_levels": '{"4": {"msgBacklog": 7}}'}
        connection.execute(insert(BacklogReportRow), [backlog])
    rows = reports.get(f"{ADMIN}/reports/rates/acme/orders", params={"since": "1h"}).json()
    by_sub = {r["subscription"]: r for r in rows if r["avgRate"] != 10.0}
    assert by_sub["urgent"]["priorityLevels"] == {
        "9": {"msgOut": 60, "avgRate": 1.0},
        "0": {"msgOut": 6, "avgRate": 0.1},
    }
    assert by_sub["other"]["priorityLevels"] is None
    backlogs = reports.get(f"{ADMIN}/reports/backlog/acme/orders", params={"since": "1h"}).json()
    waiting = {r["subscription"]: r["priorityLevels"] for r in backlogs}
    assert waiting["urgent"] == {"4": {"msgBacklog": 7}} and waiting["fast"] is None


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


def queued_tasks(redis_url: str) -> list[dict]:
    """The report tasks waiting in the Celery queue: id, name and keyword arguments."""
    client = redis.Redis.from_url(redis_url)
    try:
        messages = [json.loads(m) for m in client.lrange(QUEUE, 0, -1)]
    finally:
        client.close()
    tasks = []
    for message in reversed(messages):  # Celery pushes to the head: oldest last
        _args, kwargs, _embed = json.loads(base64.b64decode(message["body"]))
        headers = message["headers"]
        tasks.append({"id": headers["id"], "task": headers["task"], "kwargs": kwargs})
    return tasks


def run_states(http, run_ids: list[int]) -> list[tuple[str, int]]:
    """(status, attempt) of each run, over HTTP."""
    runs = [http.get(f"{ADMIN}/reports/runs/{run_id}") for run_id in run_ids]
    assert all(r.status_code == 200 for r in runs), [r.text for r in runs]
    return [(r.json()["status"], r.json()["attempt"]) for r in runs]


def test_a_requested_run_is_recorded_queued_at_once(http, redis_server):
    # No Celery worker here: the run is never taken, and stays queued where anyone sees it.
    answer = http.post(f"{ADMIN}/reports/runs", json={"jobs": ["rates"], "lookbackSeconds": 600})
    assert answer.status_code == 202
    body = answer.json()
    [run_id] = body["runIds"]
    assert body["jobs"] == ["rates"] and body["taskId"]
    [run] = body["runs"]
    assert (run["id"], run["job"], run["status"], run["attempt"]) == (run_id, "rates", "queued", 0)
    assert run["taskId"] == body["taskId"] and run["startedAt"] is None
    assert run["params"] == {"trigger": "requested", "lookbackSeconds": 600}
    assert http.get(f"{ADMIN}/reports/runs/{run_id}").json() == run
    assert [r["id"] for r in http.get(f"{ADMIN}/reports/runs").json()] == [run_id]
    for params in ({"status": "queued"}, {"taskId": body["taskId"]}):
        assert [r["id"] for r in http.get(f"{ADMIN}/reports/runs", params=params).json()] == [
            run_id
        ]
    assert http.get(f"{ADMIN}/reports/runs", params={"taskId": "other"}).json() == []
    # The task carries the run's id, under the task id the answer gave.
    assert queued_tasks(redis_server.url) == [
        {
            "id": body["taskId"],
            "task": "sluice.run_reports",
            "kwargs": {"jobs": ["rates"], "lookback_seconds": 600, "run_ids": {"rates": run_id}},
        }
    ]
    # Every job by default (rates, backlog, advice), one run each (a job named twice runs once).
    both = http.post(f"{ADMIN}/reports/runs", json={"jobs": ["backlog", "rates", "backlog"]})
    assert [r["job"] for r in both.json()["runs"]] == ["backlog", "rates"]
    assert len(http.post(f"{ADMIN}/reports/runs", json={}).json()["runIds"]) == 3
    assert len(queued_tasks(redis_server.url)) == 3
    bad = http.post(f"{ADMIN}/reports/runs", json={"jobs": ["nope"]})
    assert bad.status_code == 400 and "Invalid jobs" in bad.json()["reason"]
    bad = http.post(f"{ADMIN}/reports/runs", json={"lookbackSeconds": "1h"})
    assert bad.status_code == 400
    assert len(http.get(f"{ADMIN}/reports/runs").json()) == 6


@pytest.fixture
def task_settings(settings, tmp_path):
    """The report task's settings: an empty lake, minute windows; the Celery app uses them."""
    yield from task_settings_for(settings, tmp_path)


def test_a_requested_run_is_followed_until_it_succeeds(http, redis_server, spark, task_settings):
    from reports.tasks import run_reports

    body = http.post(f"{ADMIN}/reports/runs", json={"lookbackSeconds": 300}).json()
    assert run_states(http, body["runIds"]) == [("queued", 0)] * 3
    [task] = queued_tasks(redis_server.url)
    # What a Celery worker does with the message: run the task with its id and arguments.
    result = run_reports.apply(kwargs=task["kwargs"], task_id=task["id"])
    assert result.successful(), result.traceback
    assert [(r["job"], r["runId"], r["attempt"]) for r in result.result] == [
        ("rates", body["runIds"][0], 1),
        ("backlog", body["runIds"][1], 1),
        ("advice", body["runIds"][2], 1),
    ]
    assert run_states(http, body["runIds"]) == [("succeeded", 1)] * 3
    run = http.get(f"{ADMIN}/reports/runs/{body['runIds'][0]}").json()
    assert run["queuedAt"] <= run["startedAt"] <= run["finishedAt"]
    assert (run["rows"], run["error"], run["taskId"]) == (0, None, task["id"])
    assert run["params"]["trigger"] == "requested" and run["params"]["windows"] == ["minute"]
    # A message delivered again (a worker lost before its acknowledgement) runs nothing more.
    again = run_reports.apply(kwargs=task["kwargs"], task_id=task["id"])
    assert again.result == []
    assert run_states(http, body["runIds"]) == [("succeeded", 1)] * 3


def test_a_failing_run_is_queued_again_then_fails(http, redis_server, spark, task_settings):
    # One retry; a time budget no run can meet.  Attempt 1 fails and the run is queued again
    # with its error; attempt 2 fails and the run is failed.
    from reports.celery_app import app
    from reports.tasks import run_reports

    failing = task_settings.model_copy(
        update={"report_retries": 1, "report_time_budget_seconds": 0.001}
    )
    app.conf.sluice_settings = failing
    body = http.post(f"{ADMIN}/reports/runs", json={"jobs": ["rates"]}).json()
    [run_id] = body["runIds"]
    [task] = queued_tasks(redis_server.url)
    # Eagerly, Celery runs the retry at once, without its countdown.
    result = run_reports.apply(kwargs=task["kwargs"], task_id=task["id"])
    assert result.failed() and "time budget" in str(result.result)
    run = http.get(f"{ADMIN}/reports/runs/{run_id}").json()
    assert (run["status"], run["attempt"], run["rows"]) == ("failed", 2, 0)
    assert "time budget of 0.001 s exceeded" in run["error"] and run["finishedAt"]


def test_run_states_as_the_task_marks_them(http, task_settings):
    # The store is what the task marks runs with; each state as a client sees it.
    from reports.tasks import _store

    store = _store(task_settings.effective_database_url, task_settings.jdbc_jar)
    [run_id] = http.post(f"{ADMIN}/reports/runs", json={"jobs": ["backlog"]}).json()["runIds"]
    window = (NOW - timedelta(hours=1), NOW)
    assert store.start("backlog", *window, params={"windows": ["hour"]}, run_id=run_id) == (
        run_id,
        1,
    )
    run = http.get(f"{ADMIN}/reports/runs/{run_id}").json()
    assert (run["status"], run["attempt"], run["finishedAt"]) == ("running", 1, None)
    assert datetime.fromisoformat(run["windowFrom"]) == window[0]
    assert run["params"]["windows"] == ["hour"] and run["params"]["trigger"] == "requested"
    store.fail("backlog", run_id, "RuntimeError: lake not reachable", requeue=True)
    run = http.get(f"{ADMIN}/reports/runs/{run_id}").json()
    assert (run["status"], run["attempt"], run["error"]) == (
        "queued",
        1,
        "RuntimeError: lake not reachable",
    )
    store.start("backlog", *window, params={}, run_id=run_id)
    store.fail("backlog", run_id, "RuntimeError: again")
    assert run_states(http, [run_id]) == [("failed", 2)]
    assert store.pending({"backlog": run_id}) == {}


def test_a_requested_run_waits_for_the_run_in_progress(http, redis_server, task_settings):
    from reports.tasks import RUN_LOCK_KEY, RunLockBusy, run_reports_once

    redis.Redis.from_url(redis_server.url).set(RUN_LOCK_KEY, "a scheduled run")
    body = http.post(f"{ADMIN}/reports/runs", json={"jobs": ["rates"]}).json()
    run_ids = {"rates": body["runIds"][0]}
    with pytest.raises(RunLockBusy):
        run_reports_once(task_settings, ["rates"], None, run_ids, body["taskId"])
    assert run_states(http, body["runIds"]) == [("queued", 0)]
    # A scheduled run in the same case skips, and records nothing.
    assert run_reports_once(task_settings, ["rates"]) == []
    assert len(http.get(f"{ADMIN}/reports/runs").json()) == 1


def test_a_scheduled_run_skips_while_nothing_new_was_landed(
    http, redis_server, spark, task_settings
):
    # Quiet tenants cost no report runs: the beat's run (its own arguments) runs Spark only
    # when snapshots were landed since the last complete run.
    import time

    from models.stats import SNAPSHOT_FIELD, SNAPSHOT_STREAM, StatsSnapshot
    from reports.celery_app import make_celery
    from reports.tasks import run_reports

    beat = make_celery(task_settings).conf.beat_schedule["run-reports"]
    assert beat["kwargs"] == {"skip_unchanged": True}
    stream = redis.Redis.from_url(redis_server.url)

    def scheduled() -> list:
        result = run_reports.apply(kwargs=beat["kwargs"])
        assert result.successful(), result.traceback
        return result.result

    def snapshot() -> None:
        row = StatsSnapshot(
            ts=int(time.time() * 1000),
            interval_ms=10_000,
            worker="w1",
            tenant="acme",
            namespace="orders",
            topic="persistent://acme/orders/t",
            partition=-1,
            subscription="sub",
            msg_in=5,
            msg_out=5,
        )
        stream.xadd(SNAPSHOT_STREAM, {SNAPSHOT_FIELD: row.to_json()})

    assert scheduled() == []  # nothing ever landed
    assert http.get(f"{ADMIN}/reports/runs").json() == []
    snapshot()
    assert [r["job"] for r in scheduled()] == ["rates", "backlog", "advice"]
    assert len(http.get(f"{ADMIN}/reports/runs").json()) == 3
    assert scheduled() == []  # nothing landed since: no Spark, no run rows
    assert len(http.get(f"{ADMIN}/reports/runs").json()) == 3
    snapshot()
    assert len(scheduled()) == 3
    # A run asked for over REST runs whatever was landed.
    body = http.post(f"{ADMIN}/reports/runs", json={}).json()
    [task] = queued_tasks(redis_server.url)
    assert len(run_reports.apply(kwargs=task["kwargs"], task_id=task["id"]).result) == 3
    assert run_states(http, body["runIds"]) == [("succeeded", 1)] * 3


@pytest.fixture
def broker_down(admin_server, settings):
    """The admin service sends report tasks to a Redis that is not there."""
    state = admin_server.app.state.sluice
    kept = state.reports
    state.reports = ReportQueue(
        settings.model_copy(update={"redis_url": f"redis://127.0.0.1:{free_port()}/0"})
    )
    yield
    state.reports.close()
    state.reports = kept


def test_a_run_that_cannot_be_queued_is_failed(http, broker_down):
    answer = http.post(f"{ADMIN}/reports/runs", json={"jobs": ["rates"]})
    assert answer.status_code == 503
    assert answer.json()["reason"].startswith("Cannot queue the report run")
    [run] = http.get(f"{ADMIN}/reports/runs").json()
    assert (run["status"], run["attempt"]) == ("failed", 0)
    assert run["error"].startswith("Cannot queue the report run") and run["finishedAt"]


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
