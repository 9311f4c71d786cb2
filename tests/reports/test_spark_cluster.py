"""The report jobs on a Spark standalone cluster give the results of a local run.

A master and two workers (1 core, 512 MB each) start on the loopback interface from the
installed pyspark package; both jobs run once with ``SLUICE_SPARK_MASTER=local[*]`` and once
with the master's ``spark://127.0.0.1:PORT`` URL, in a driver process of their own, exactly as
the Celery task runs them (settings from the environment, results written to PostgreSQL over
JDBC, from the executors on the cluster).  The lake is a folder every executor sees (one
machine here; a shared file system or object store on a real cluster).  The rows of both runs
must be the same.
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
from tests.conftest import flush_redis, truncate
from tests.reports.conftest import T0, snap, write_lake
from tests.reports.spark_standalone import SparkStandalone, loopback_environment

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
JDBC_JAR = Settings().jdbc_jar
SUBSCRIPTIONS = ("audit", "billing", "search")
PARTITIONS = (0, 1)
INTERVALS = 720  # two hours of 10-second snapshots
DRIVER_TIMEOUT = 180.0


def snapshots() -> list:
    """Two hours of a two-partition topic with three subscriptions: rates that vary, a limit
    raised after an hour, throttling in some intervals, backlogs that grow and shrink."""
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


def run_driver(environment: dict[str, str], cwd: Path, lookback: float) -> list[dict[str, Any]]:
    """Run both jobs in a driver process; what it ran.  The driver's process group is ended
    whatever happens."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.reports.report_driver", str(lookback)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=environment,
        cwd=cwd,
        start_new_session=True,
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


def same_row(row: dict[str, Any], expected: dict[str, Any]) -> bool:
    """Equal, but for floating-point sums that the cluster may add up in another order
    (relative difference up to 1e-9)."""
    if row.keys() != expected.keys():
        return False
    for key, value in expected.items():
        if isinstance(value, float) and isinstance(row[key], float):
            if row[key] != pytest.approx(value, rel=1e-9, abs=1e-12):
                return False
        elif row[key] != value:
            return False
    return True


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
    lake = write_lake(tmp_path / "lake", snapshots(), batch=1_000)
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

    local = run_driver({**environment, "SLUICE_SPARK_MASTER": "local[*]"}, tmp_path, lookback)
    assert [(r["job"], r["attempt"]) for r in local] == [("rates", 1), ("backlog", 1)]
    expected = result_rows(db)

    cluster_conf = {
        "spark.executor.memory": "512m",
        "spark.executor.cores": "1",
        "spark.cores.max": "2",
        "spark.driver.host": "127.0.0.1",
    }
    on_cluster = run_driver(
        {
            **environment,
            "SLUICE_SPARK_MASTER": cluster.url,
            "SLUICE_SPARK_CONF": json.dumps(cluster_conf),
        },
        tmp_path,
        lookback,
    )
    assert [(r["job"], r["attempt"]) for r in on_cluster] == [("rates", 1), ("backlog", 1)]
    got = result_rows(db)

    # Three subscriptions, each with 120 minutes, 2 hours and 1 day.
    windows = len(SUBSCRIPTIONS) * (INTERVALS // 6 + 2 + 1)
    for job in ("rates", "backlog"):
        assert len(expected[job]) == windows, job
        assert len(got[job]) == len(expected[job]), job
        for cluster_row, local_row in zip(got[job], expected[job], strict=True):
            assert same_row(cluster_row, local_row), (job, cluster_row, local_row)
    by_run = {r["job"]: r["rows"] for r in on_cluster}
    assert by_run == {"rates": windows, "backlog": windows}
    with db.connect() as connection:
        runs = connection.execute(select(ReportRun.status)).scalars().all()
    assert runs == ["succeeded"] * 4

    # The cluster did the work: the master lists the driver's application as finished, and
    # both workers ran an executor of it.
    deadline = time.monotonic() + 20
    while True:
        state = cluster.state()
        finished = [a for a in state["completedapps"] if a["name"] == "sluice-reports"]
        if finished or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert len(finished) == 1, state
    assert finished[0]["state"] == "FINISHED"
    application = finished[0]["id"]
    for index in (1, 2):
        executors = list((cluster.worker_dir(index) / application).iterdir())
        assert executors, f"worker {index} ran no executor of {application}"
