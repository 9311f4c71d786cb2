"""Unthrottled end-to-end throughput of one worker vs a raw Redis Streams loop.

Produce ahead N messages of 256 bytes; one Shared subscription; a consumer process receives
and acknowledges them through the worker.  Baseline, measured in the same run on the same
Redis: one process doing XREADGROUP COUNT 1000 + XACK on N pre-produced entries.
Target: ratio at least 0.5.

    python -m bench.dispatch_throughput [--quick]
"""

from __future__ import annotations

import multiprocessing as mp
import time

import redis

import sluice
from bench.harness import Stack, arguments, report
from models import keys
from models.names import TopicName
from models.protocol import wake_data

TOPIC = "persistent://bench/ns/throughput"
PAYLOAD = b"x" * 256


def raw_loop(url: str, count: int) -> float:
    """Messages/s of the plain XREADGROUP + XACK loop."""
    client = redis.Redis.from_url(url)
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


def fill_topic(client: sluice.Client, count: int) -> None:
    """Produce ``count`` messages through the produce script, many entries per call."""
    name = TopicName.from_full(TOPIC)
    script_keys = [keys.log(name), keys.partition_stats(name), keys.idle(name)]
    for start in range(0, count, 500):
        n = min(500, count - start)
        args = [keys.WAKE_CHANNEL, wake_data(name.full), n]
        for _ in range(n):
            args += [1, "d", PAYLOAD]
        client.scripts["produce"](keys=script_keys, args=args)


def consume(url: str, count: int, ready, go, result) -> None:
    """Consumer process: subscribe, wait for the signal, receive and ack ``count`` messages."""
    with sluice.Client(url) as client:
        consumer = client.subscribe(TOPIC, "bench", consumer_type=sluice.ConsumerType.Shared)
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


def main() -> None:
    args = arguments(__doc__.split("\n")[0])
    count = 20_000 if args.quick else 200_000
    with Stack() as stack:
        stack.setup_namespace()
        with stack.admin() as http:
            http.put("/admin/v2/persistent/bench/ns/throughput")
        baseline = raw_loop(stack.redis_url, count)
        context = mp.get_context("spawn")
        ready, go, result = context.Event(), context.Event(), context.Queue()
        process = context.Process(target=consume, args=(stack.redis_url, count, ready, go, result))
        process.start()
        ready.wait(60)
        with sluice.Client(stack.redis_url) as client:
            fill_topic(client, count)
        go.set()
        sluice_rate = result.get(timeout=600)
        process.join(60)
    report(
        "Unthrottled dispatch throughput (256-byte messages, one Shared subscription)",
        [
            {
                "path": "raw redis-py XREADGROUP COUNT 1000 + XACK (baseline)",
                "messages": count,
                "msg/s": baseline,
                "ratio to baseline": 1.0,
            },
            {
                "path": "producer -> worker -> consumer receive + ack",
                "messages": count,
                "msg/s": sluice_rate,
                "ratio to baseline": sluice_rate / baseline,
            },
        ],
        args.json,
    )


if __name__ == "__main__":
    main()
