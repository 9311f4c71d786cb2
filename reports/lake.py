"""Stats landing: snapshots from the Redis stream into Parquet, partitioned by date and hour.

Workers append snapshots to ``sluice:stats``; ``land`` moves them to
``<lake>/snapshots/date=YYYY-MM-DD/hour=HH/part-<first stream id>.parquet``.  Landing is
idempotent: a batch always starts right after the checkpoint (the last landed stream id,
kept in Redis), its files are named by their first id and replaced whole, and the checkpoint
moves (and the stream is trimmed) only after the files are in place.  A landing interrupted
anywhere is simply redone by the next run, rewriting the same files: no row is duplicated,
none is lost.  A lock keeps two landings from interleaving.

The lake is a local folder, or an ``s3a://`` / ``s3://`` / ``hdfs://`` URL (the same URL
Spark reads with its Hadoop settings; here pyarrow's filesystems write it).
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow import fs as pafs

from models.stats import SNAPSHOT_COLUMNS, SNAPSHOT_FIELD, SNAPSHOT_STREAM, StatsSnapshot

CHECKPOINT_KEY = "sluice:stats:landed"
LOCK_KEY = "sluice:stats:landing-lock"
SNAPSHOTS_DIR = "snapshots"

_INT_COLUMNS = {"ts", "interval_ms", "partition"}
_FLOAT_COLUMNS = {"limit_msg_per_s", "limit_byte_per_s", "allowed_msgs", "allowed_bytes"}


def _arrow_type(name: str, annotation: str) -> pa.DataType:
    if name in _FLOAT_COLUMNS:
        return pa.float64()
    if annotation.startswith("int"):
        return pa.int64()
    return pa.string()


ARROW_SCHEMA = pa.schema(
    [pa.field("snapshot_id", pa.string(), nullable=False)]
    + [
        pa.field(f, _arrow_type(f, StatsSnapshot.__annotations__[f]), nullable=True)
        for f in SNAPSHOT_COLUMNS
    ]
)


@dataclass(frozen=True, slots=True)
class LandingResult:
    """What one landing did."""

    rows: int
    files: int
    checkpoint: str


def lake_filesystem(lake_url: str) -> tuple[pafs.FileSystem, str]:
    """The filesystem and root path of a lake URL (``s3a://`` is Hadoop's name for S3)."""
    if "://" not in lake_url:
        return pafs.LocalFileSystem(), lake_url.rstrip("/")
    scheme, rest = lake_url.split("://", 1)
    if scheme in ("s3a", "s3n"):
        lake_url = f"s3://{rest}"
    filesystem, path = pafs.FileSystem.from_uri(lake_url)
    return filesystem, path.rstrip("/")


def snapshots_path(lake_url: str) -> str:
    """Where the snapshot Parquet dataset lives, as a URL or path Spark can read."""
    return f"{lake_url.rstrip('/')}/{SNAPSHOTS_DIR}"


def _columns(entries: list[tuple[bytes, dict[bytes, bytes]]]) -> dict[str, list[Any]]:
    columns: dict[str, list[Any]] = {name: [] for name in ARROW_SCHEMA.names}
    for stream_id, fields in entries:
        row = orjson.loads(fields[SNAPSHOT_FIELD.encode()])
        columns["snapshot_id"].append(stream_id.decode())
        for name in SNAPSHOT_COLUMNS:
            columns[name].append(row.get(name))
    return columns


def _partition_of(ts_ms: int) -> tuple[str, int]:
    moment = datetime.fromtimestamp(ts_ms / 1000, UTC)
    return moment.strftime("%Y-%m-%d"), moment.hour


def write_batch(
    filesystem: pafs.FileSystem, root: str, entries: list[tuple[bytes, dict[bytes, bytes]]]
) -> int:
    """Write one batch of stream entries as Parquet files, one per (date, hour); return files."""
    columns = _columns(entries)
    groups: dict[tuple[str, int], list[int]] = defaultdict(list)
    for index, ts in enumerate(columns["ts"]):
        groups[_partition_of(ts)].append(index)
    table = pa.table(columns, schema=ARROW_SCHEMA)
    name = f"part-{columns['snapshot_id'][0]}.parquet"
    for (date, hour), rows in groups.items():
        folder = f"{root}/{SNAPSHOTS_DIR}/date={date}/hour={hour:02d}"
        filesystem.create_dir(folder, recursive=True)
        # Spark skips files whose names start with a dot: a torn write is never read.
        temporary = f"{folder}/.{uuid.uuid4().hex}.tmp"
        pq.write_table(table.take(rows), temporary, filesystem=filesystem, compression="zstd")
        filesystem.move(temporary, f"{folder}/{name}")
    return len(groups)


def holds_priorities(lake_url: str, since: datetime, until: datetime) -> bool:
    """Whether a snapshot landed in the hours of ``[since, until)`` has ``priority_levels``.

    Read from the Parquet footers (each row group's null count of that column), not the rows:
    the report jobs build their per-priority columns only when this says so.  A footer
    without the count answers yes (the columns are then built and come out empty).
    """
    filesystem, root = lake_filesystem(lake_url)
    hour = since.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    while hour < until:
        folder = f"{root}/{SNAPSHOTS_DIR}/date={hour:%Y-%m-%d}/hour={hour:%H}"
        found = filesystem.get_file_info(pafs.FileSelector(folder, allow_not_found=True))
        landed = [
            info.path
            for info in found
            if info.type == pafs.FileType.File and not info.base_name.startswith((".", "_"))
        ]
        if any(_file_holds_priorities(filesystem, path) for path in landed):
            return True
        hour += timedelta(hours=1)
    return False


def _file_holds_priorities(filesystem: pafs.FileSystem, path: str) -> bool:
    with filesystem.open_input_file(path) as source:
        metadata = pq.ParquetFile(source).metadata
    column = metadata.schema.to_arrow_schema().get_field_index("priority_levels")
    if column < 0:  # landed before the column existed
        return False
    for index in range(metadata.num_row_groups):
        group = metadata.row_group(index)
        stats = group.column(column).statistics
        if stats is None or not stats.has_null_count or stats.null_count < group.num_rows:
            return True
    return False


def land(redis, lake_url: str, *, batch: int = 50_000, lock_seconds: int = 600) -> LandingResult:
    """Land every snapshot in the stream that is not in the lake yet.

    ``redis`` is a synchronous redis-py client.  Raises ``RuntimeError`` if another landing
    holds the lock.
    """
    token = uuid.uuid4().hex
    if not redis.set(LOCK_KEY, token, nx=True, ex=lock_seconds):
        raise RuntimeError("another stats landing is running")
    try:
        filesystem, root = lake_filesystem(lake_url)
        checkpoint = redis.get(CHECKPOINT_KEY) or b"0-0"
        rows = files = 0
        while True:
            entries = redis.xrange(SNAPSHOT_STREAM, min=b"(" + checkpoint, count=batch)
            if not entries:
                break
            files += write_batch(filesystem, root, entries)
            checkpoint = entries[-1][0]
            redis.set(CHECKPOINT_KEY, checkpoint)
            redis.xtrim(SNAPSHOT_STREAM, minid=checkpoint, approximate=False)
            rows += len(entries)
            if len(entries) < batch:
                break
        return LandingResult(rows=rows, files=files, checkpoint=checkpoint.decode())
    finally:
        # Release only our own lock (a lock that expired may belong to someone else now).
        if redis.get(LOCK_KEY) == token.encode():
            redis.delete(LOCK_KEY)
