"""Unthrottled end-to-end throughput of one worker vs a raw Redis Streams loop.

Produce ahead N messages of 256 bytes; one Shared subscription; a consumer process receives
and acknowledges them through the worker.  Baselines, measured in the same run on the same
Redis: one process doing XREADGROUP COUNT 1000 + XACK on N pre-produced entries, once with
the hiredis parser that Sluice's own clients use (the target's denominator) and once with
redis-py's pure-Python reply parser (the loop of the design brief, "redis-py without
hiredis").  Target: at least 0.6 of the hiredis loop.  Also measured, not a target: the same
path with the producer batching (100 messages per entry; throughput in messages), and a
Key_Shared subscription on keyed messages (1,000 keys; one consumer, so the ratio to Shared is
the cost of routing by key, which looks at every entry).  Target too: a topic in a resource
group (whose dispatch limit is far above the rate, so only the group's reservation costs) at
least 0.6 of the hiredis loop; its ratio to the plain path is the cost of the reservation.
Target too: a Shared subscription on
messages of 10 priority levels (0..9 in turn), kept in a stream per level and handed out
highest level first (docs/priority.md; the line after the table names the layout the
partition used), at least 0.6 of the hiredis loop.  Each
figure is the median of three rounds (one with ``--quick``); the rounds alternate the paths
so that a slow spell of the machine does not fall on one of them only.

    python -m bench.dispatch_throughput [--quick]
"""

from __future__ import annotations

import multiprocessing as mp
import statistics
import time

import redis
from redis._parsers import _RESP2Parser

import sluice
from bench.harness import Stack, arguments, report
from sluice.protocol import keys
from sluice.protocol.connection import connect
from sluice.protocol.frames import wake_data
from sluice.protocol.names import TopicName

TOPIC = "persistent://bench/ns/throughput"
BATCHED_TOPIC = "persistent://bench/ns/batched"
KEYED_TOPIC = "persistent://bench/ns/keyed"
GROUPED_TOPIC = "persistent://bench/grouped/throughput"
GROUP_LIMIT = 1_000_000_000  # messages per second: limited, so every call reserves, never binding
PRIORITY_TOPIC = "persistent://bench/ns/prioritized"
LEVELS = 10
KEYS = 1000
PAYLOAD = b"x" * 256
BATCH = 100


def raw_loop(url: str, count: int, pure_python: bool = False) -> float:
    """Messages/s of the plain XREADGROUP + XACK loop."""
    options = {"parser_class": _RESP2Parser} if pure_python else {}
    client = connect(url, **options)
    fill_raw(client, "bench:raw", count)
    client.xgroup_create("bench:raw", "g", id="0")
    started = time.perf_counter()
    done = 0
    while done < count:
        reply = client.xreadgroup("g", "c", {"bench:raw": ">"}, count=1000)
        ids = [entry_id for _stream, entries in reply for entry_id, _f in entries]
        client.xack("bench:raw", "g", *ids)
        done += len(ids)
    elapsed = time.perf_counter() - started
    client.delete("bench:raw")
    return count / elapsed


def fill_raw(client: redis.Redis, stream: str, count: int) -> None:
    """XADD ``count`` entries, pipelined."""
    for start in range(0, count, 1000):
        pipe = client.pipeline(transaction=False)
        for _ in range(min(1000, count - start)):
            pipe.xadd(stream, {"d": PAYLOAD})
        pipe.execute()


def fill_topic(client: sluice.Client, count: int, topic: str = TOPIC, keyed: bool = False) -> None:
    """Produce ``count`` messages through the produce script, many entries per call (with a
    partition key of ``KEYS`` when ``keyed``; priorities 0..9 in turn on ``PRIORITY_TOPIC``,
    the default 4 stored as nothing, as the producer does)."""
    name = TopicName.from_full(topic)
    script_keys = [keys.log(name), keys.partition_stats(name), keys.idle(name)]
    for start in range(0, count, 500):
        n = min(500, count - start)
        args = [keys.WAKE_CHANNEL, wake_data(name.full), n]
        for i in range(n):
            priority = (start + i) % LEVELS
            if keyed:
                args += [2, "d", PAYLOAD, "k", f"key-{(start + i) % KEYS}"]
            elif topic == PRIORITY_TOPIC and priority != 4:
                args += [2, "d", PAYLOAD, "u", str(priority)]
            else:
                args += [1, "d", PAYLOAD]
        client.scripts["produce"](keys=script_keys, args=args)


def fill_batched(client: sluice.Client, count: int) -> None:
    """Produce ``count`` messages through a batching producer (``BATCH`` per entry)."""
    producer = client.create_producer(
        BATCHED_TOPIC, batching_enabled=True, batching_max_messages=BATCH, block_if_queue_full=True
    )
    for _ in range(count):
        producer.send_async(PAYLOAD, None)
    producer.flush()
    producer.close()


def consume(url: str, topic: str, count: int, ready, go, result) -> None:
    """Consumer process: subscribe, wait for the signal, receive and ack ``count`` messages."""
    kind = sluice.ConsumerType.KeyShared if topic == KEYED_TOPIC else sluice.ConsumerType.Shared
    with sluice.Client(url) as client:
        consumer = client.subscribe(topic, "bench", consumer_type=kind)
        ready.set()
        go.wait()
        started = None
        for _ in range(count):
            message = consumer.receive(timeout_millis=30_000)
            if started is None:
                started = time.perf_counter()
            consumer.acknowledge(message)
        consumer.close()  # flushes the last acknowledgements
        result.put((count - 1) / (time.perf_counter() - started))


def layout_of(url: str, topic: str) -> str:
    """How the partition of ``topic`` keeps its priorities (docs/priority.md)."""
    name = TopicName.from_full(topic)
    client = connect(url)
    levels = client.hlen(keys.levels(name))
    client.close()
    return f"a stream per level ({levels} besides 4)" if levels else "the priority index"


def through_sluice(
    url: str,
    count: int,
    batched: bool = False,
    keyed: bool = False,
    grouped: bool = False,
    prioritized: bool = False,
) -> float:
    """Messages/s received and acknowledged by a consumer process through the worker."""
    context = mp.get_context("spawn")
    ready, go, result = context.Event(), context.Event(), context.Queue()
    topic = (
        BATCHED_TOPIC
        if batched
        else KEYED_TOPIC
        if keyed
        else GROUPED_TOPIC
        if grouped
        else PRIORITY_TOPIC
        if prioritized
        else TOPIC
    )
    process = context.Process(target=consume, args=(url, topic, count, ready, go, result))
    process.start()
    ready.wait(60)
    with sluice.Client(url) as client:
        if batched:
            fill_batched(client, count)
        else:
            fill_topic(client, count, topic, keyed)
    go.set()
    rate = result.get(timeout=600)
    process.join(60)
    return rate


def main() -> None:
    args = arguments(__doc__.split("\n")[0])
    count = 20_000 if args.quick else 200_000
    rounds = 1 if args.quick else 3
    with Stack() as stack:
        stack.setup_namespace()
        with stack.admin() as http:
            http.put("/admin/v2/persistent/bench/ns/throughput")
            http.put("/admin/v2/persistent/bench/ns/batched")
            http.put("/admin/v2/persistent/bench/ns/keyed")
            http.put("/admin/v2/namespaces/bench/grouped")
            http.put("/admin/v2/persistent/bench/grouped/throughput")
            http.put("/admin/v2/resourcegroups/bench", json={"dispatchRateInMsgs": GROUP_LIMIT})
            http.post("/admin/v2/namespaces/bench/grouped/resourcegroup/bench")
            http.put("/admin/v2/persistent/bench/ns/prioritized")
        baselines, pures, sluices, batched, keyed = [], [], [], [], []
        grouped, prioritized = [], []
        for _ in range(rounds):
            baselines.append(raw_loop(stack.redis_url, count))
            pures.append(raw_loop(stack.redis_url, count, pure_python=True))
            sluices.append(through_sluice(stack.redis_url, count))
            batched.append(through_sluice(stack.redis_url, count, batched=True))
            keyed.append(through_sluice(stack.redis_url, count, keyed=True))
            grouped.append(through_sluice(stack.redis_url, count, grouped=True))
            prioritized.append(through_sluice(stack.redis_url, count, prioritized=True))
        baseline = statistics.median(baselines)
        pure = statistics.median(pures)
        sluice_rate = statistics.median(sluices)
        batched_rate = statistics.median(batched)
        keyed_rate = statistics.median(keyed)
        grouped_rate = statistics.median(grouped)
        priority_rate = statistics.median(prioritized)
        priority_layout = layout_of(stack.redis_url, PRIORITY_TOPIC)
    paths = (
        ("raw XREADGROUP COUNT 1000 + XACK, hiredis parser (baseline)", baseline),
        ("raw XREADGROUP COUNT 1000 + XACK, pure-Python parser (design brief's loop)", pure),
        ("producer -> worker -> consumer receive + ack", sluice_rate),
        (f"the same, producer batching {BATCH} messages per entry", batched_rate),
        (f"the same, Key_Shared subscription, {KEYS:,} keys", keyed_rate),
        ("the same, the topic in a resource group (dispatch limit not binding)", grouped_rate),
        (f"the same, {LEVELS} priority levels (target 0.6 of the hiredis loop)", priority_rate),
    )
    report(
        "Unthrottled dispatch throughput (256-byte messages, one subscription, one consumer)",
        [
            {
                "path": path,
                "messages": count,
                "msg/s": rate,
                "ratio to hiredis loop": rate / baseline,
                "ratio to pure-Python loop": rate / pure,
            }
            for path, rate in paths
        ],
        args.json,
    )
    print(
        f"resource group: {grouped_rate / baseline:.2f} of the hiredis loop (target 0.6), "
        f"{grouped_rate / sluice_rate:.2f} of the same topic in no group"
    )
    print(f"priority layout: {priority_layout}")


if __name__ == "__main__":
    main()
