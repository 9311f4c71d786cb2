"""The report jobs on a Spark standalone cluster give the results of a local run.

A master and two workers (1 core, 512 MB each) start on the loopback interface from the
installed pyspark package; both jobs run with ``SLUICE_SPARK_MASTER=local[*]``, then on the
master's ``spark://127.0.0.1:PORT`` URL, each time in a driver process of its own exactly as the
Celery task runs them (settings from the environment, results written to PostgreSQL over JDBC,
from the executors on the cluster), and once more with ``spark-submit --master spark://...``
and ``reports/submit.py``.  The lake is a folder every executor sees (one
machine here; a shared file system or object store on a real cluster).  The rows of both runs
must be the same each time.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from models.reports import BacklogReportRow, RateReportRow, ReportRun
from models.settings import Settings
from server.embedded_redis import die_with_parent
from tests import ROOT
from tests.conftest import flush_redis, truncate
from tests.reports.conftest import T0, snap, write_lake
from tests.reports.spark_standalone import SPARK_HOME, SparkStandalone, loopback_environment

pytestmark = [pytest.mark.spark, pytest.mark.slow]

JDBC_JAR = Settings().jdbc_jar
SUBSCRIPTIONS = ("audit", "billing", "search")
PARTITIONS = (0, 1)
# One hour of 10-second snapshots: every window has at most 400 intervals, where the
# percentiles' sketches are exact (beyond, they are within a rank bound and may differ with
# the order in which the executors merge them).
INTERVALS = 360
DRIVER_TIMEOUT = 180.0


def snapshots() -> list:
    """An hour of a two-partition topic with three subscriptions: rates that vary, a limit
    raised after half an hour, throttling in some intervals, backlogs that grow and shrink."""
    rows = []
    for s, subscription in enumerate(SUBSCRIPTIONS):
        for partition in PARTITIONS:
            backlog = 0
            for i in range(INTERVALS):
                limit = 100.0 if i < INTERVALS // 2 else 150.0
                out = int(limit * 10 * (0.4 + 0.06 * ((i * 7 + partition * 3 + s) % 11)))
                published = 900 + 40 * ((i + s) % 9)
                backlog = max(0, backlog + published - out)
                rows.append(
                    snap(
                        10 * (i + 1),
                        subscription,
                        partition=partition,
                        msg_in=published,
                        bytes_in=published * 256,
                        msg_out=out,
                        bytes_out=out * 256,
                        backlog_msgs=backlog,
                        backlog_bytes=backlog * 256,
                        consumers=2,
                        limit_msg_per_s=limit,
                        limit_msg_limiter="topic",
                        limit_msg_source="namespace",
                        throttled_topic=int(out >= limit * 10 * 0.9),
                    )
                )
    return rows


def run_driver(environment: dict[str, str], cwd: Path, command: list[str]) -> list[dict[str, Any]]:
    """Run both jobs with ``command``, a driver process; what it ran.  The driver's process
    group is ended whatever happens."""
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=environment,
        cwd=cwd,
        start_new_session=True,
        preexec_fn=die_with_parent,
    )
    try:
        output, _ = process.communicate(timeout=DRIVER_TIMEOUT)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    text = output.decode(errors="replace")
    assert process.returncode == 0, text[-5_000:]
    return json.loads(text.strip().splitlines()[-1])


def result_rows(db) -> dict[str, list[dict[str, Any]]]:
    """Every result row of both reports, without the ids that differ between runs, in order."""
    rows = {}
    with db.connect() as connection:
        for job, model in (("rates", RateReportRow), ("backlog", BacklogReportRow)):
            found = connection.execute(select(model)).mappings().all()
            rows[job] = sorted(
                (
                    {k: v for k, v in row.items() if k not in ("id", "run_id")}
                    for row in (dict(r) for r in found)
                ),
                key=lambda r: (r["window"], r["window_start"], r["subscription"]),
            )
    return rows


def same_value(value: Any, expected: Any) -> bool:
    """Equal, but for floating-point sums that the cluster may add up in another order
    (relative difference up to 1e-9)."""
    if isinstance(value, float) and isinstance(expected, float):
        return value == pytest.approx(expected, rel=1e-9, abs=1e-12)
    return value == expected


@pytest.fixture
def cluster(tmp_path):
    spark = SparkStandalone(tmp_path / "spark", workers=2, cores=1, memory="512m")
    spark.start()
    try:
        yield spark
    finally:
        spark.stop()


def test_report_jobs_on_a_standalone_cluster_match_the_local_run(
    cluster, database_url, db, redis_server, tmp_path
):
    assert Path(JDBC_JAR).exists(), f"the PostgreSQL JDBC driver is not at {JDBC_JAR}"
    lake = write_lake(tmp_path / "lake", snapshots(), batch=500)
    truncate(db)
    flush_redis(redis_server.url)
    # Every window from an hour before the data: the minutes, hours and the day of T0.
    lookback = (datetime.now(UTC) - T0 + timedelta(hours=1)).total_seconds()
    environment = loopback_environment()
    environment.update(
        PYTHONPATH=str(ROOT),
        DATABASE_URL=database_url,
        REDIS_URL=redis_server.url,
        SLUICE_LAKE_PATH=lake,
        SLUICE_JDBC_JAR=JDBC_JAR,
        SLUICE_SPARK_DRIVER_MEMORY="512m",
        SLUICE_SPARK_SHUFFLE_PARTITIONS="4",
        SLUICE_REPORT_WINDOWS="minute,hour,day",
        SLUICE_REPORT_RETRIES="0",
    )

    celery_path = [sys.executable, "-m", "tests.reports.report_driver", str(lookback)]
    local = run_driver({**environment, "SLUICE_SPARK_MASTER": "local[*]"}, tmp_path, celery_path)
    assert [(r["job"], r["attempt"]) for r in local] == [
        ("rates", 1),
        ("backlog", 1),
        ("advice", 1),
    ]
    expected = result_rows(db)

    cluster_conf = {
        "spark.executor.memory": "512m",
        "spark.executor.cores": "1",
        "spark.cores.max": "2",
        "spark.driver.host": "127.0.0.1",
    }
    # As the Celery worker runs them: the master from SLUICE_SPARK_MASTER.
    on_cluster = run_driver(
        {
            **environment,
            "SLUICE_SPARK_MASTER": cluster.url,
            "SLUICE_SPARK_CONF": json.dumps(cluster_conf),
        },
        tmp_path,
        celery_path,
    )
    got = {"celery": result_rows(db)}
    # With spark-submit: its --master wins over SLUICE_SPARK_MASTER (left at local[*] here).
    submit = [
        str(SPARK_HOME / "bin" / "spark-submit"),
        "--master",
        cluster.url,
        "--driver-memory",
        "512m",
        "--jars",
        JDBC_JAR,
        str(ROOT / "reports" / "submit.py"),
        "--lookback-seconds",
        str(lookback),
    ]
    submitted = run_driver(
        {
            **environment,
            "SLUICE_SPARK_MASTER": "local[*]",
            "SLUICE_SPARK_CONF": json.dumps(cluster_conf),
            "PYSPARK_PYTHON": sys.executable,
        },
        tmp_path,
        submit,
    )
    got["spark-submit"] = result_rows(db)

    # Three subscriptions, each with 60 minutes, 1 hour and 1 day.
    windows = len(SUBSCRIPTIONS) * (INTERVALS // 6 + 1 + 1)
    for ran in (local, on_cluster, submitted):
        assert [(r["job"], r["rows"]) for r in ran] == [
            ("rates", windows),
            ("backlog", windows),
            ("advice", len(SUBSCRIPTIONS)),  # one span row per subscription
        ]
    for how, rows in got.items():
        for job in ("rates", "backlog"):
            assert len(expected[job]) == windows, job
            assert len(rows[job]) == len(expected[job]), (how, job)
            for cluster_row, local_row in zip(rows[job], expected[job], strict=True):
                differ = {k: (v, local_row.get(k)) for k, v in cluster_row.items()}
                differ = {k: pair for k, pair in differ.items() if not same_value(*pair)}
                assert not differ, (how, job, local_row["window"], differ)
    with db.connect() as connection:
        runs = connection.execute(select(ReportRun.status)).scalars().all()
    assert runs == ["succeeded"] * 9  # three runs of three jobs

    # The cluster did the work: the master lists both drivers' applications as finished, and
    # both workers ran an executor of each.
    deadline = time.monotonic() + 20
    while True:
        state = cluster.state()
        finished = [a for a in state["completedapps"] if a["name"] == "sluice-reports"]
        if len(finished) == 2 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert len(finished) == 2, state
    for application in finished:
        assert application["state"] == "FINISHED"
        for index in (1, 2):
            executors = list((cluster.worker_dir(index) / application["id"]).iterdir())
            assert executors, f"worker {index} ran no executor of {application['id']}"
