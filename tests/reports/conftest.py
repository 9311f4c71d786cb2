"""Helpers of the reporting tests: snapshot builders and a lake writer (the SparkSession is in
tests/conftest)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from models.stats import SNAPSHOT_COLUMNS, StatsSnapshot
from reports.jobs import SNAPSHOT_SCHEMA
from reports.lake import lake_filesystem, write_batch

T0 = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)
T0_MS = int(T0.timestamp() * 1000)
TOPIC = "persistent://acme/orders/created"
# A snapshot's limit fields: 100 msg/s set on the namespace, applied by the topic limiter.
LIMITED = {
    "limit_msg_per_s": 100.0,
    "limit_msg_limiter": "topic",
    "limit_msg_source": "namespace",
}


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


def at_the_limit(
    intervals: int, msg_in: int, backlog_step: int, bytes_step: int = 0, **fields: Any
) -> list[StatsSnapshot]:
    """``intervals`` 10-second snapshots of subscription ``sub`` dispatching at the limit
    (``LIMITED``: 1000 messages an interval) while ``msg_in`` come in: the backlog grows by
    ``backlog_step`` messages and ``bytes_step`` bytes an interval; ``fields`` in each."""
    return [
        snap(
            10 * (i + 1),
            msg_in=msg_in,
            msg_out=1000,
            backlog_msgs=backlog_step * (i + 1),
            backlog_bytes=bytes_step * (i + 1),
            **fields,
            **LIMITED,
        )
        for i in range(intervals)
    ]


def frame(spark: SparkSession, snapshots: list[StatsSnapshot]) -> DataFrame:
    """Snapshots as the DataFrame the jobs read from the lake."""
    schema = SNAPSHOT_SCHEMA
    columns = [f.name for f in schema.fields if f.name in SNAPSHOT_COLUMNS]
    rows = [tuple(getattr(s, c) for c in columns) for s in snapshots]
    return spark.createDataFrame(rows, schema=schema.__class__([schema[c] for c in columns]))


def write_lake(path, snapshots: list[StatsSnapshot], batch: int | None = None) -> str:
    """Write snapshots straight into a lake folder, as landing would: in batches of ``batch``
    stream entries (all in one by default), each batch one Parquet file per hour."""
    filesystem, root = lake_filesystem(str(path))
    entries = [(f"{i + 1}-0".encode(), {b"json": s.to_json()}) for i, s in enumerate(snapshots)]
    size = batch or len(entries) or 1
    for start in range(0, len(entries), size):
        write_batch(filesystem, root, entries[start : start + size])
    return str(path)
