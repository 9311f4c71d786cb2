"""What reading every counter live costs a stats read, against the document-only read.

``GET .../partitioned-stats`` reads, per partition, the owning worker's document and one
atomic reading of the partition's counters, consumer groups and subscriptions' counters
(``stats_live.lua``, ``DataPlane.partitions_stats``).  The baseline, measured in the same run
on the same data, is the read that took counters from the documents: the documents (MGET)
and the consumer groups (``read_backlogs``), two pipelined round trips as well.

Measured over partitioned topics of P partitions with S subscriptions each (every partition
with its stream, groups, counters and a worker-shaped document): the median and p95 latency
of one read, their ratio to the baseline, and the longest single Redis command of the live
read (SLOWLOG: how long Redis served no one else).

    python -m bench.stats_live_read [--quick]
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

import orjson

from api.dataplane import DataPlane
from bench.harness import arguments, percentile, report
from dataplane.backlog import read_backlogs
from dataplane.batches import get_many
from dataplane.stats_document import subscription_document, topic_document
from server.embedded_redis import EmbeddedRedis
from sluice.protocol import keys
from sluice.protocol.connection import connect, connect_async
from sluice.protocol.names import TopicName

ENTRIES = 100  # entries per partition's stream


def fill(url: str, partitions: list[TopicName], subscriptions: int) -> None:
    """Streams, groups, counters, subscription sets and documents, as a worker leaves them."""
    client = connect(url)
    names = [f"sub-{i}" for i in range(subscriptions)]
    for partition in partitions:
        pipe = client.pipeline(transaction=False)
        for _ in range(ENTRIES):
            pipe.xadd(keys.log(partition), {"d": b"x" * 100})
        for name in names:
            pipe.xgroup_create(keys.log(partition), name, id="0", entries_read=0)
            pipe.sadd(keys.subs(partition), name)
            pipe.hset(keys.sub_key(partition, name, "stats"), mapping={"msg_out": 7, "acked": 5})
        pipe.hset(keys.partition_stats(partition), mapping={"msg_in": ENTRIES, "bytes_in": 10_000})
        doc = topic_document(
            ENTRIES,
            10_000,
            {name: subscription_document({}, "Shared", rate_expired=0.0) for name in names},
            publish_limited_total=0,
        )
        pipe.set(keys.doc(partition), orjson.dumps(doc))
        pipe.execute()
    client.close()


async def baseline(client, scripts, partitions: list[TopicName]) -> dict:
    """The document-only read: documents, then the consumer groups (backlogs) laid over
    them, as the read was before counters were read live."""
    raws = await get_many(client, [keys.doc(p) for p in partitions])
    docs = {p.full: orjson.loads(raw) for p, raw in zip(partitions, raws, strict=True)}
    backlogs = await read_backlogs(client, scripts, partitions)
    for partition in partitions:
        doc = docs[partition.full]
        average = float(doc.get("averageMsgSize") or 0.0)
        for name, backlog in backlogs.get(partition.full, {}).items():
            sub = doc["subscriptions"][name]
            sub["msgBacklog"] = sub["msgBacklogNoDelayed"] = backlog.entries
            sub["unackedMessages"] = backlog.pending
            sub["backlogSize"] = int(backlog.entries * average)
        doc["backlogSize"] = sum(s["backlogSize"] for s in doc["subscriptions"].values())
    return docs


async def measure(url: str, partitions: list[TopicName], reads: int) -> dict[str, list[float]]:
    client = connect_async(url)
    plane = DataPlane(client, 30_000)
    times: dict[str, list[float]] = {"baseline": [], "live": []}
    try:
        await plane.partitions_stats(partitions)  # scripts loaded, connections made
        await baseline(client, plane.scripts, partitions)
        for _ in range(reads):
            for what in ("baseline", "live"):
                start = time.perf_counter()
                if what == "live":
                    await plane.partitions_stats(partitions)
                else:
                    await baseline(client, plane.scripts, partitions)
                times[what].append(time.perf_counter() - start)
    finally:
        await client.aclose()
    return times


def main() -> None:
    args = arguments(__doc__.splitlines()[0])
    shapes = [(4, 2), (64, 4)] if args.quick else [(1, 10), (16, 10), (256, 4), (1024, 2)]
    reads = 20 if args.quick else 50
    rows = []
    with tempfile.TemporaryDirectory(prefix="sluice-bench-") as tmp:
        server = EmbeddedRedis(Path(tmp) / "redis").start()
        try:
            admin = connect(server.url)
            for count, subscriptions in shapes:
                admin.flushall()
                topic = TopicName.from_full(f"persistent://bench/stats/t{count}")
                partitions = [topic.partition(i) for i in range(count)]
                fill(server.url, partitions, subscriptions)
                admin.config_set("slowlog-log-slower-than", 0)
                admin.config_set("slowlog-max-len", 100_000)
                admin.slowlog_reset()
                times = asyncio.run(measure(server.url, partitions, reads))
                scripts = [
                    e["duration"] / 1000
                    for e in admin.slowlog_get(100_000)
                    if str(e["command"]).split(" ")[0].upper().lstrip("B'") in ("EVALSHA", "EVAL")
                ]
                base, live = times["baseline"], times["live"]
                rows.append(
                    {
                        "partitions": count,
                        "subscriptions each": subscriptions,
                        "baseline median ms": percentile(base, 0.5) * 1000,
                        "live median ms": percentile(live, 0.5) * 1000,
                        "live p95 ms": percentile(live, 0.95) * 1000,
                        "live / baseline": percentile(live, 0.5) / percentile(base, 0.5),
                        "longest script call ms": max(scripts, default=0.0),
                    }
                )
            admin.close()
        finally:
            server.stop()
    report("Stats read with live counters vs the document-only read", rows, args.json)


if __name__ == "__main__":
    main()
