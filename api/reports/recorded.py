"""Recorded traffic for the limit simulator: the stats snapshots of a window, read from the
lake (Parquet, with pyarrow) and from the part of the stats stream not landed yet.

Landing (``reports.lake``) moves snapshots from the ``sluice:stats`` stream into
``<lake>/snapshots/date=.../hour=.../*.parquet`` and trims the stream behind it, so the two
together hold every snapshot; one that is in both (landed, not trimmed yet) counts once, by
its stream id (``snapshot_id``).  Snapshots are summed per (topic, subscription, interval)
as the reports do.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.dataset as ds
from pyarrow import fs as pafs
from redis.asyncio import Redis

from models.simulation import RecordedInterval
from models.stats import SNAPSHOT_FIELD, SNAPSHOT_STREAM

_COLUMNS = (
    "snapshot_id",
    "ts",
    "interval_ms",
    "topic",
    "partition",
    "subscription",
    "msg_in",
    "msg_out",
    "backlog_msgs",
    "throttled_broker",
    "throttled_topic",
    "throttled_subscription",
    "consumers",
    "unacked",
)
Key = tuple[str, str]  # (topic, subscription)
_HIVE = ds.partitioning(pa.schema([("date", pa.string()), ("hour", pa.string())]), flavor="hive")


def _lake_rows(lake: str, tenant: str, namespace: str, since: datetime, until: datetime):
    if "://" in lake:
        filesystem, root = pafs.FileSystem.from_uri(lake.replace("s3a://", "s3://", 1))
    else:
        if not (Path(lake) / "snapshots").exists():
            return []
        filesystem, root = pafs.LocalFileSystem(), lake
    dataset = ds.dataset(
        f"{root.rstrip('/')}/snapshots",
        filesystem=filesystem,
        format="parquet",
        partitioning="hive",
    )
    first, last = (since - timedelta(days=1)).date(), until.date()
    days = [str(first + timedelta(days=n)) for n in range((last - first).days + 1)]
    where = (
        ds.field("date").isin(days)
        & (ds.field("tenant") == tenant)
        & (ds.field("namespace") == namespace)
        & (ds.field("ts") >= int(since.timestamp() * 1000))
        & (ds.field("ts") < int(until.timestamp() * 1000))
    )
    return dataset.to_table(columns=list(_COLUMNS), filter=where).to_pylist()


async def _stream_rows(redis: Redis, tenant: str, namespace: str, since: datetime, until: datetime):
    # Stream ids are the time an entry was added, a little after its ``ts``.
    low = int(since.timestamp() * 1000)
    entries = await redis.xrange(SNAPSHOT_STREAM, min=str(low), max="+")
    rows = []
    for stream_id, fields in entries:
        row = orjson.loads(fields[SNAPSHOT_FIELD.encode()])
        if row.get("tenant") != tenant or row.get("namespace") != namespace:
            continue
        if not low <= row["ts"] < until.timestamp() * 1000:
            continue
        row["snapshot_id"] = stream_id.decode()
        rows.append(row)
    return rows


def intervals_of(rows: Iterable[dict[str, Any]]) -> dict[Key, list[RecordedInterval]]:
    """Snapshots summed per (topic, subscription, interval), each subscription's intervals in
    time order."""
    seen: set[str] = set()
    groups: dict[tuple[str, str, int], dict[str, Any]] = {}
    for row in rows:
        if not row.get("subscription") or row["snapshot_id"] in seen:
            continue
        seen.add(row["snapshot_id"])
        key = (row["topic"], row["subscription"], round(row["ts"] / row["interval_ms"]))
        group = groups.setdefault(
            key,
            {"ts": 0, "seconds": 0.0, "in": 0, "out": 0, "backlog": 0, "throttled": False},
        )
        group.setdefault("partitions", set()).add(row.get("partition"))
        group["unacked"] = group.get("unacked", 0) + (row.get("unacked") or 0)
        group["consumers"] = group.get("consumers", 0) + (row.get("consumers") or 0)
        group["ts"] = max(group["ts"], row["ts"])
        group["seconds"] = max(group["seconds"], row["interval_ms"] / 1000)
        group["in"] += row.get("msg_in") or 0
        group["out"] += row.get("msg_out") or 0
        group["backlog"] += row.get("backlog_msgs") or 0
        group["throttled"] |= any(
            (row.get(f"throttled_{level}") or 0) > 0
            for level in ("broker", "topic", "subscription")
        )
    out: dict[Key, list[RecordedInterval]] = defaultdict(list)
    for (topic, subscription, _), group in sorted(groups.items(), key=lambda kv: kv[1]["ts"]):
        out[(topic, subscription)].append(
            RecordedInterval(
                end=group["ts"] / 1000,
                seconds=group["seconds"],
                published=group["in"],
                delivered=group["out"],
                backlog=group["backlog"],
                throttled=group["throttled"],
                partitions=len(group["partitions"]),
                waiting=group["backlog"] - group["unacked"],
                consumers=group["consumers"],
            )
        )
    return out


async def recorded_intervals(
    lake: str, redis: Redis, tenant: str, namespace: str, since: datetime, until: datetime
) -> dict[Key, list[RecordedInterval]]:
    """Every subscription's recorded intervals of a namespace in ``[since, until)``."""
    landed = await asyncio.to_thread(_lake_rows, lake, tenant, namespace, since, until)
    fresh = await _stream_rows(redis, tenant, namespace, since, until)
    return intervals_of([*landed, *fresh])
