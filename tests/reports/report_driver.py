"""Run both report jobs once, as the Celery task does, in a process of its own.

``python -m tests.reports.report_driver LOOKBACK_SECONDS`` reads every setting from the
environment (``SLUICE_SPARK_MASTER``, ``SLUICE_LAKE_PATH``, ``DATABASE_URL``, ``REDIS_URL``, ...)
exactly as a Celery worker would, calls ``run_reports_once`` (the body of
``sluice.run_reports``), stops its SparkSession and prints what it ran as JSON on the last line
of its output.  A process of its own, because a Python process holds one SparkContext, and the
test session's own ``local[1]`` session may be running.
"""

from __future__ import annotations

import json
import sys

from models.settings import Settings
from reports.session import spark_session
from reports.tasks import run_reports_once


def main() -> int:
    settings = Settings(_env_file=None)
    results = run_reports_once(settings, lookback_seconds=float(sys.argv[1]))
    spark_session(settings).stop()  # the session it ran on: the application ends here
    print(json.dumps(results), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
