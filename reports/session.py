"""The SparkSession of the report jobs, built from settings.

``local[*]`` by default, any master URL by setting; a local master stays on the loopback
interface (``SPARK_LOCAL_IP``), so it needs no resolvable host name; UTC everywhere (session
and JVM), the PostgreSQL JDBC driver on the classpath when present, and any extra Spark
settings (for example the ``spark.hadoop.fs.s3a.*`` keys an ``s3a://`` lake needs) from
``SLUICE_SPARK_CONF``.
"""

from __future__ import annotations

import atexit
import json
import os
from pathlib import Path

from pyspark import SparkContext
from pyspark.sql import SparkSession

from models.settings import Settings

UTC_JVM = "-Duser.timezone=UTC"


def spark_conf(settings: Settings) -> dict[str, str]:
    """Every Spark setting the jobs run with."""
    conf = {
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.memory": settings.spark_driver_memory,
        "spark.driver.extraJavaOptions": UTC_JVM,
        "spark.executor.extraJavaOptions": UTC_JVM,
        "spark.sql.shuffle.partitions": str(settings.spark_shuffle_partitions),
        # Keep hash aggregation for the quantile sketches of up to this many groups per task;
        # past it a task falls back to sorting its rows (Spark's default of 128 sorted every
        # input row of a report run).
        "spark.sql.objectHashAggregate.sortBased.fallbackThreshold": "50000",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
    }
    if settings.jdbc_jar and Path(settings.jdbc_jar).exists():
        conf["spark.jars"] = settings.jdbc_jar
    if settings.spark_conf.strip():
        extra = json.loads(settings.spark_conf)
        if not isinstance(extra, dict):
            raise ValueError("SLUICE_SPARK_CONF must be a JSON object")
        conf.update({str(k): str(v) for k, v in extra.items()})
    return conf


def spark_session(settings: Settings, app_name: str = "sluice-reports") -> SparkSession:
    """Get (or create) the process's SparkSession."""
    if settings.spark_master.startswith("local"):
        # Read by the JVM when it starts: without it Spark looks up this host's name, which
        # fails on a machine whose name is in neither /etc/hosts nor DNS.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.master(settings.spark_master).appName(app_name)
    for key, value in spark_conf(settings).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    _kill_jvm_at_exit()
    return session


def kill_jvm() -> None:
    """Kill this process's Spark JVM, if it runs (a report in progress fails with it)."""
    gateway = SparkContext._gateway
    process = getattr(gateway, "proc", None)
    if process is not None and process.poll() is None:
        process.kill()


_registered: list[bool] = []


def _kill_jvm_at_exit() -> None:
    """Kill the session's JVM when this process exits.  PySpark counts on the JVM seeing its
    stdin close, but a JVM in the middle of a job can take minutes to stop, or never does:
    a scheduler stopped (or whose standalone was killed) would leave it running alone."""
    if not _registered:
        _registered.append(True)
        atexit.register(kill_jvm)
