"""A report run started right after a burst reports the burst: the run asks the workers for
the stats interval so far before it lands, and says up to when its data reaches
(``dataUntil``).  The workers here snapshot every 60 s, so without that request the burst
would not be in any landed snapshot."""

from __future__ import annotations

import base64
import json
from datetime import datetime

import pytest
import redis

import sluice
from sluice.admin_cli import main as sluice_admin
from tests.reports.task_settings import task_settings_for
from tests.workers.conftest import ADMIN, drain

TOPIC = "persistent://acme/orders/created"
BURST = 1000


@pytest.fixture
def worker_settings(worker_settings):
    return worker_settings.model_copy(update={"stats_interval_seconds": 60.0})


@pytest.fixture
def task_settings(worker_settings, tmp_path):
    """The report task's settings (an empty lake, minute windows), as the Celery app's."""
    yield from task_settings_for(worker_settings, tmp_path)


def _queued_task(redis_url: str) -> dict:
    """The one report task waiting in the Celery queue: its id and keyword arguments."""
    from reports.celery_app import QUEUE

    client = redis.Redis.from_url(redis_url)
    try:
        [message] = [json.loads(m) for m in client.lrange(QUEUE, 0, -1)]
    finally:
        client.close()
    _args, kwargs, _embed = json.loads(base64.b64decode(message["body"]))
    return {"id": message["headers"]["id"], "kwargs": kwargs}


def test_a_run_started_right_after_a_burst_reports_it(
    http, namespace, worker, client, redis_server, spark, task_settings, admin_server, capsys
):
    from reports.tasks import run_reports

    assert http.put(f"{ADMIN}/persistent/acme/orders/created").status_code == 204
    consumer = client.subscribe(TOPIC, "sub", consumer_type=sluice.ConsumerType.Shared)
    producer = client.create_producer(TOPIC, batching_enabled=False, block_if_queue_full=True)
    for _ in range(BURST):
        producer.send_async(b"x" * 100, None)
    producer.flush()
    assert len(drain(consumer, BURST, timeout=20)) == BURST
    drained_at = datetime.now().astimezone()

    # At once, as a user would: request the run, then a worker takes the task.
    body = http.post(f"{ADMIN}/reports/runs", json={"lookbackSeconds": 600}).json()
    task = _queued_task(redis_server.url)
    result = run_reports.apply(kwargs=task["kwargs"], task_id=task["id"])
    assert result.successful(), result.traceback

    rows = http.get(f"{ADMIN}/reports/rates/acme/orders", params={"window": "minute"}).json()
    mine = [r for r in rows if r["subscription"] == "sub"]
    # The burst may straddle two minutes: together they hold all of it, each at a rate.
    assert sum(r["msgOut"] for r in mine) == BURST, mine
    assert all(r["avgRate"] > 0 for r in mine if r["msgOut"]), mine
    backlog = http.get(f"{ADMIN}/reports/backlog/acme/orders", params={"window": "minute"}).json()
    assert [b["backlogMsgs"] for b in backlog if b["subscription"] == "sub"][-1] == 0

    # Every run of the request says up to when its data reaches: after the drain.
    runs = {run_id: http.get(f"{ADMIN}/reports/runs/{run_id}").json() for run_id in body["runIds"]}
    for run in runs.values():
        assert run["status"] == "succeeded"
        assert run["dataUntil"] is not None and run["dataUntil"] == run["params"]["dataUntil"]
        data_until = datetime.fromisoformat(run["dataUntil"])
        assert drained_at <= data_until <= datetime.fromisoformat(run["params"]["until"])
    # And the CLI shows it, on the progress line and in the document.
    capsys.readouterr()
    first = body["runIds"][0]
    code = sluice_admin(["--admin-url", admin_server.url, "reports", "run", str(first), "--wait"])
    out, err = capsys.readouterr()
    assert code == 0
    assert json.loads(out)["dataUntil"] == runs[first]["dataUntil"]
    assert f"data until {runs[first]['dataUntil']}" in err
