"""Run the report jobs once outside Celery: from ``spark-submit``, or ``python -m reports.submit``.

    spark-submit --master spark://spark-master:7077 --driver-memory 2g \\
        --jars /usr/share/java/postgresql.jar \\
        "$(python -c 'import reports.submit as m; print(m.__file__)')" --lookback-seconds 7200

Every setting comes from the environment, as for the Celery worker (``DATABASE_URL``,
``REDIS_URL``, ``SLUICE_LAKE_PATH``, ``SLUICE_SPARK_CONF``, ...), except the Spark master: the
one ``spark-submit`` was given (``--master``) when there is one, else ``SLUICE_SPARK_MASTER``.
It does what a scheduled run does (``run_reports_once``): lands the stats, runs the jobs (all,
or those of ``--jobs``), records each run in ``report_runs``; then prints what ran as JSON.
Exit status 1 when a job failed, 3 when another report run is in progress (2: bad arguments).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from models.reports import REPORT_JOBS
from models.settings import Settings


def submitted_master() -> str | None:
    """The master ``spark-submit`` started this process with, or None outside spark-submit."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        # Not under spark-submit: no JVM yet, and none is started here, so that the session
        # starts it with every setting (the driver's memory included).
        return None
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # connects to spark-submit's JVM
    return SparkConf().get("spark.master", None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="reports.submit",
        description="Run the report jobs once, outside Celery (see docs/scaling.md).",
    )
    parser.add_argument(
        "--jobs", default=",".join(REPORT_JOBS), help="comma-separated: rates, backlog"
    )
    parser.add_argument(
        "--lookback-seconds",
        type=float,
        default=None,
        help="recompute the windows of this many seconds back (SLUICE_REPORT_LOOKBACK_SECONDS)",
    )
    args = parser.parse_args(argv)
    jobs = [job.strip() for job in args.jobs.split(",") if job.strip()]
    unknown = [job for job in jobs if job not in REPORT_JOBS]
    if unknown or not jobs:
        parser.error(f"--jobs: use {', '.join(REPORT_JOBS)}")

    from pyspark.sql import SparkSession

    from reports.tasks import ReportJobsFailed, run_reports_once

    settings = Settings()
    master = submitted_master()
    if master:
        settings = settings.model_copy(update={"spark_master": master})
    try:
        results = run_reports_once(settings, jobs, args.lookback_seconds)
    except ReportJobsFailed as exc:
        print(f"reports.submit: {exc}", file=sys.stderr)
        return 1
    finally:
        session = SparkSession.getActiveSession()
        if session is not None:
            session.stop()
    if not results and jobs:
        print("reports.submit: another report run is in progress", file=sys.stderr)
        return 3
    print(json.dumps(results), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
