"""``brokers``, ``audit`` and ``reports`` commands."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime

import pytest
from sqlalchemy import update

from models.reports import ReportRun
from sluice.admin_cli.client import AdminError
from sluice.admin_cli.commands.audit import timestamp

KEY = "dispatchThrottlingRatePerTopicInMsg"


def test_dynamic_config(ok, cli):
    assert KEY in ok("brokers", "list-dynamic-config").json
    assert ok("brokers", "get-all-dynamic-config").json == {}
    assert ok("brokers", "get-runtime-config").json[KEY] == "0"
    ok("brokers", "update-dynamic-config", "--config", KEY, "--value", "100")
    assert ok("brokers", "get-all-dynamic-config").json == {KEY: "100"}
    assert ok("brokers", "get-runtime-config").json[KEY] == "100"
    ok("brokers", "delete-dynamic-config", "-c", KEY)
    assert ok("brokers", "get-all-dynamic-config").json == {}


def test_dynamic_config_errors(cli):
    unknown = cli("brokers", "update-dynamic-config", "-c", "noSuchKey", "-v", "1")
    assert unknown.code == 1 and "404" in unknown.err
    bad = cli("brokers", "update-dynamic-config", "-c", KEY, "-v", "lots")
    assert bad.code == 1 and "412" in bad.err
    assert cli("brokers", "update-dynamic-config", "-c", KEY).code == 2  # --value is required


def test_dynamic_config_dry_run(ok):
    answer = ok("brokers", "update-dynamic-config", "-c", KEY, "-v", "5", "--dry-run").json
    assert answer["dryRun"] is True
    assert ok("brokers", "get-all-dynamic-config").json == {}
    ok("brokers", "update-dynamic-config", "-c", KEY, "-v", "5")
    assert ok("brokers", "delete-dynamic-config", "-c", KEY, "--dry-run").json["dryRun"] is True
    assert ok("brokers", "get-all-dynamic-config").json == {KEY: "5"}


def test_healthcheck(ok):
    assert ok("brokers", "healthcheck").out.strip() == "ok"


def test_audit_list_with_filters(ok, cli, namespace):
    ok("namespaces", "set-dispatch-rate", namespace, "-md", "10")
    ok("namespaces", "set-dispatch-rate", namespace, "-md", "20")
    entries = ok("audit", "list", "--entity", namespace, "--entity-type", "namespace.dispatchRate")
    rows = entries.json
    assert [row["after"]["dispatchThrottlingRateInMsg"] for row in rows] == [20, 10]
    assert rows[0]["before"]["dispatchThrottlingRateInMsg"] == 10
    assert len(ok("audit", "list", "--entity-prefix", "acme", "--limit", "2").json) == 2
    assert ok("audit", "list", "--role", "nobody").json == []
    assert len(ok("audit", "list", "--since", "1h", "--until", "2999-01-01T00:00:00+00:00").json)
    assert ok("audit", "list", "--until", "1h").json == []
    table = ok("audit", "list", "--entity", namespace, "--output", "table").out.splitlines()
    assert table[0].split()[:3] == ["id", "at", "role"]
    assert len(table) == 5  # header, rule, namespace creation, two rate changes
    assert "20 msg/s" in table[2] and "10 msg/s" in table[3]  # rates summarised
    assert "400" in cli("audit", "list", "--limit", "0").err
    bad = cli("audit", "list", "--since", "yesterday")
    assert bad.code == 1 and "invalid time" in bad.err


def test_relative_timestamps():
    now = datetime(2026, 1, 31, 12, 0, tzinfo=UTC)
    assert timestamp("90m", now) == "2026-01-31T10:30:00+00:00"
    assert timestamp("2d", now) == "2026-01-29T12:00:00+00:00"
    assert timestamp("2026-01-01T00:00:00Z") == "2026-01-01T00:00:00Z"
    with pytest.raises(AdminError):
        timestamp("soon")


@pytest.mark.parametrize("kind", ["rates", "backlog"])
def test_reports_of_a_namespace(cli, namespace, kind):
    result = cli("reports", kind, namespace, "--since", "1h", "--window", "hour")
    assert (result.code, result.out.strip()) == (0, "[]")
    missing = cli("reports", kind, "acme/nope")
    assert missing.code == 1 and missing.out == ""
    assert "does not exist" in missing.err and "(HTTP 404)" in missing.err


def test_report_runs_and_charts(cli, namespace, tmp_path):
    queued = cli("reports", "start", "--jobs", "rates", "--lookback-seconds", "600")
    assert queued.code == 0, queued.err
    answer = json.loads(queued.out)
    [run_id] = answer["runIds"]
    shown = json.loads(cli("reports", "run", str(run_id)).out)
    assert (shown["id"], shown["job"], shown["status"]) == (run_id, "rates", "queued")
    listed = json.loads(
        cli("reports", "runs", "--status", "queued", "--task-id", answer["taskId"]).out
    )
    assert [r["id"] for r in listed] == [run_id]
    assert cli("reports", "runs", "--status", "failed").out.strip() == "[]"
    table = cli("reports", "start", "--jobs", "backlog", "--output", "table").out.splitlines()
    assert table[0].startswith("task ") and table[1].split()[:4] == [
        "id",
        "job",
        "status",
        "attempt",
    ]
    assert table[3].split()[1:4] == ["backlog", "queued", "0"]
    missing = cli("reports", "run", "999999")
    assert missing.code == 1 and "does not exist" in missing.err
    bad = cli("reports", "start", "--jobs", "latency")
    assert bad.code == 1 and "Invalid jobs" in bad.err
    target = tmp_path / "chart.png"
    chart = cli(
        "reports", "chart", "persistent://acme/orders/created", "-s", "sub", "-f", str(target)
    )
    assert chart.code == 0 and target.read_bytes().startswith(b"\x89PNG")
    page = cli(
        "reports",
        "chart",
        "acme/orders/created",
        "-s",
        "sub",
        "--format",
        "html",
        "-f",
        str(tmp_path / "chart.html"),
    )
    assert page.code == 0 and "<img" in (tmp_path / "chart.html").read_text()


def _advance_later(db, run_id: int, steps: list[dict], pause: float) -> threading.Thread:
    """Move a run through ``steps`` (column values), one every ``pause`` seconds, as the
    report worker would."""

    def advance() -> None:
        for values in steps:
            time.sleep(pause)
            with db.begin() as connection:
                connection.execute(update(ReportRun).where(ReportRun.id == run_id).values(**values))

    thread = threading.Thread(target=advance, daemon=True)
    thread.start()
    return thread


def _queue_run(cli) -> int:
    queued = cli("reports", "start", "--jobs", "rates")
    assert queued.code == 0, queued.err
    [run_id] = json.loads(queued.out)["runIds"]
    return run_id


@pytest.mark.parametrize("outcome, code", [("succeeded", 0), ("failed", 1)])
def test_report_run_wait_follows_to_the_end(cli, db, namespace, outcome, code):
    run_id = _queue_run(cli)
    final = {"status": outcome, "rows": 7 if outcome == "succeeded" else 0}
    if outcome == "failed":
        final["error"] = "the lake is unreachable"
    thread = _advance_later(db, run_id, [{"status": "running", "attempt": 1}, final], 0.7)
    started = time.monotonic()
    followed = cli("reports", "run", str(run_id), "--wait", "--wait-timeout", "30")
    thread.join()
    assert time.monotonic() - started >= 1.4  # it waited for the end, not just one read
    assert followed.code == code, followed.err
    assert json.loads(followed.out)["status"] == outcome
    lines = followed.err.splitlines()
    assert lines[0] == f"run {run_id} (rates): queued, attempt 0"
    assert lines[1] == f"run {run_id} (rates): running, attempt 1"
    last = {
        "succeeded": f"run {run_id} (rates): succeeded, attempt 1, 7 rows",
        "failed": f"run {run_id} (rates): failed, attempt 1: the lake is unreachable",
    }[outcome]
    assert lines[2:] == [last]


def test_report_start_wait_and_the_timeout(cli, db, namespace):
    # Nothing takes the run here: --wait-timeout gives up with exit status 3, having shown it.
    run_id = _queue_run(cli)
    started = time.monotonic()
    unfinished = cli("reports", "run", str(run_id), "--follow", "--wait-timeout", "1.5")
    assert 1.4 <= time.monotonic() - started < 10
    assert unfinished.code == 3
    assert json.loads(unfinished.out)["status"] == "queued"
    assert unfinished.err.splitlines()[-1] == f"not finished after 1.5 s: run {run_id}"
    # Without --wait the status is read once and the exit status is 0 whatever it is.
    assert cli("reports", "run", str(run_id)).code == 0
    # start --wait follows every run it queued; the first one still waits, so give up at once.
    both = cli("reports", "start", "--wait", "--wait-timeout", "0")
    assert both.code == 3
    answer = json.loads(both.out)
    assert [r["status"] for r in answer["runs"]] == ["queued"] * 3
    assert len(both.err.splitlines()) == 4  # one line per run, then the timeout
