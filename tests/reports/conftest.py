"""Helpers of the reporting tests: snapshot builders (the SparkSession is in tests/conftest)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from models.stats import SNAPSHOT_COLUMNS, StatsSnapshot
from reports.jobs import SNAPSHOT_SCHEMA

T0 = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)
T0_MS = int(T0.timestamp() * 1000)
TOPIC = "persistent://acme/orders/created"


def snap(seconds: float, subscription: str = "sub", **fields: Any) -> StatsSnapshot:
    """A 10-second snapshot of ``TOPIC`` ending ``seconds`` after ``T0``."""
    values: dict[str, Any] = {
        "ts": T0_MS + int(seconds * 1000),
        "interval_ms": 10_000,
        "worker": "w1",
        "tenant": "acme",
        "namespace": "orders",
        "topic": TOPIC,
        "partition": -1,
        "subscription": subscription,
    }
    values.update(fields)
    return StatsSnapshot(**values)


def frame(spark: SparkSession, snapshots: list[StatsSnapshot]) -> DataFrame:
    """Snapshots as the DataFrame the jobs read from the lake."""
    schema = SNAPSHOT_SCHEMA
    columns = [f.name for f in schema.fields if f.name in SNAPSHOT_COLUMNS]
    rows = [tuple(getattr(s, c) for c in columns) for s in snapshots]
    return spark.createDataFrame(rows, schema=schema.__class__([schema[c] for c in columns]))
