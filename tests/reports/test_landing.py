"""Landing: snapshots from the Redis stream into Parquet, exactly once."""

from __future__ import annotations

from datetime import timedelta

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
import redis

from models.stats import SNAPSHOT_FIELD, SNAPSHOT_STREAM
from reports.lake import (
    CHECKPOINT_KEY,
    LOCK_KEY,
    holds_priorities,
    lake_filesystem,
    land,
    write_batch,
)
from tests.reports.conftest import T0, T0_MS, snap, write_lake


@pytest.fixture
def stream(redis_server):
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    yield client
    client.close()


def _emit(client, snapshots) -> None:
    for s in snapshots:
        client.xadd(SNAPSHOT_STREAM, {SNAPSHOT_FIELD: s.to_json()})


def _landed(lake) -> list[dict]:
    folder = lake / "snapshots"
    if not folder.exists():
        return []
    return ds.dataset(folder, format="parquet", partitioning="hive").to_table().to_pylist()


def test_lands_partitioned_by_date_and_hour(stream, tmp_path):
    # 09:59:50 and 10:00:10 land in different hour folders, one file each per batch.
    _emit(stream, [snap(-10, msg_out=1), snap(10, msg_out=2), snap(20, subscription="", msg_in=5)])
    result = land(stream, str(tmp_path))
    assert (result.rows, result.files) == (3, 2)
    hours = sorted(p.parent.name for p in (tmp_path / "snapshots").rglob("*.parquet"))
    assert hours == ["hour=09", "hour=10"]
    rows = _landed(tmp_path)
    assert sorted(r["msg_out"] for r in rows) == [0, 1, 2]
    assert {r["topic"] for r in rows} == {"persistent://acme/orders/created"}
    # Landed entries leave the stream; the checkpoint remembers the last one.
    assert stream.xlen(SNAPSHOT_STREAM) <= 1
    assert stream.get(CHECKPOINT_KEY).decode() == result.checkpoint


def test_rerun_and_new_entries_never_duplicate(stream, tmp_path):
    _emit(stream, [snap(10 * i, msg_out=i) for i in range(1, 6)])
    land(stream, str(tmp_path), batch=2)
    assert land(stream, str(tmp_path)).rows == 0
    _emit(stream, [snap(100, msg_out=100)])
    assert land(stream, str(tmp_path)).rows == 1
    assert sorted(r["msg_out"] for r in _landed(tmp_path)) == [1, 2, 3, 4, 5, 100]
    assert len({r["snapshot_id"] for r in _landed(tmp_path)}) == 6


def test_a_landing_cut_off_before_its_checkpoint_is_redone_without_duplicates(stream, tmp_path):
    _emit(stream, [snap(10, msg_out=1), snap(20, msg_out=2)])
    # The files of the first batch are written, then the process dies: no checkpoint.
    entries = stream.xrange(SNAPSHOT_STREAM)
    filesystem, root = lake_filesystem(str(tmp_path))
    write_batch(filesystem, root, entries[:1])
    # More snapshots arrive; the next landing rewrites the same file and adds the rest.
    _emit(stream, [snap(30, msg_out=3)])
    assert land(stream, str(tmp_path)).rows == 3
    assert sorted(r["msg_out"] for r in _landed(tmp_path)) == [1, 2, 3]


def test_one_landing_at_a_time(stream, tmp_path):
    stream.set(LOCK_KEY, "someone else")
    with pytest.raises(RuntimeError, match="another stats landing"):
        land(stream, str(tmp_path))
    assert stream.get(LOCK_KEY) == b"someone else"


def test_lake_urls():
    filesystem, root = lake_filesystem("/tmp/lake/")
    assert (filesystem.type_name, root) == ("local", "/tmp/lake")


def test_the_footers_tell_which_hours_hold_priorities(tmp_path):
    """Only the hours in range are read, a row group with one non-null value counts, and a
    file landed before the column existed holds none."""
    levels = '{"9": [1, 0]}'
    quiet = [snap(60 * i) for i in range(1, 4)]  # 10:01 .. 10:03
    later = [snap(3600 + 60), snap(3600 + 120, priority_levels=levels)]  # 11:01, 11:02
    lake = write_lake(tmp_path / "lake", quiet + later)
    hour = timedelta(hours=1)
    assert not holds_priorities(lake, T0, T0 + hour)
    assert holds_priorities(lake, T0, T0 + 2 * hour)
    # A range that starts inside an hour reads that whole hour's files.
    assert holds_priorities(lake, T0 + hour + timedelta(minutes=59), T0 + 2 * hour)
    assert not holds_priorities(lake, T0 + 2 * hour, T0 + 3 * hour)
    assert not holds_priorities(str(tmp_path / "empty"), T0, T0 + 2 * hour)
    # A file of an older lake, without the column; and a torn write, never read.
    filesystem, root = lake_filesystem(lake)
    folder = f"{root}/snapshots/date={T0:%Y-%m-%d}/hour=12"
    filesystem.create_dir(folder)
    pq.write_table(pa.table({"ts": [T0_MS + 7_200_000]}), f"{folder}/part-old.parquet")
    pq.write_table(pa.table({"priority_levels": [levels]}), f"{folder}/.torn.tmp")
    assert not holds_priorities(lake, T0 + 2 * hour, T0 + 3 * hour)
