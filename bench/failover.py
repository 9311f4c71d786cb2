"""Worker failover time, and dispatch throughput with one, two and three workers.

    python -m bench.failover [--quick]

Failover: two ``sluice worker`` processes (3 s leases, the default); a consumer waits on a
topic; the worker that owns it is killed with SIGKILL, and the time from the kill to the
first message delivered by the new owner is measured (a message is produced every 10 ms
after the kill; the dead owner cannot deliver any).  A replacement worker joins after each
kill.  20 kills (5 with ``--quick``).  Baseline: one produce-to-receive round trip with
both workers alive, measured the same way.

Scaling: a 6-partition topic with N messages produced ahead, drained by one consumer
process, with 1, 2 and 3 workers sharing the partitions; ratio against one worker.
"""

from __future__ import annotations

import multiprocessing as mp
import time

import redis

import sluice
from bench.harness import Stack, arguments, percentile, report
from sluice.protocol import keys
from sluice.protocol.connection import connect
from sluice.protocol.names import TopicName

LEASE_TTL = 3.0
FAILOVER_TOPIC = "persistent://bench/ns/failover"
SCALE_TOPIC = "persistent://bench/ns/scale"
PARTITIONS = 6


def first_delivery(producer, consumer, tag: str, timeout: float = 30.0) -> float:
    """Seconds until a message produced from now on is delivered (one every 10 ms)."""
    started = time.perf_counter()
    sent = 0
    while time.perf_counter() - started < timeout:
        producer.send_async(f"{tag}-{sent}".encode(), None)
        sent += 1
        try:
            message = consumer.receive(timeout_millis=10)
        except sluice.Timeout:
            continue
        consumer.acknowledge(message)
        if message.data().startswith(tag.encode()):
            elapsed = time.perf_counter() - started
            drain(consumer)
            return elapsed
    raise RuntimeError(f"nothing delivered within {timeout} s")


def drain(consumer) -> None:
    """Acknowledge whatever is still queued."""
    while True:
        try:
            consumer.acknowledge(consumer.receive(timeout_millis=300))
        except sluice.Timeout:
            return


def current_owner(plain: redis.Redis, lease: str, timeout: float = 10.0) -> str:
    """The worker holding ``lease``; waits while the partition is being handed over (a
    worker that just joined may take it gracefully, and the key is absent in between)."""
    deadline = time.monotonic() + timeout
    while (token := plain.get(lease)) is None:
        if time.monotonic() > deadline:
            raise RuntimeError(f"nobody holds {lease} after {timeout:g} s")
        time.sleep(0.01)
    return token.decode().rpartition(":")[0]


def measure_failover(kills: int) -> list[dict]:
    env = {"SLUICE_WORKER_LEASE_TTL_SECONDS": str(LEASE_TTL)}
    with Stack(worker=False, worker_env=env) as stack:
        stack.setup_namespace()
        with stack.admin() as http:
            http.put("/admin/v2/persistent/bench/ns/failover").raise_for_status()
        workers = {f"w{i}": stack.start_worker(f"w{i}") for i in range(2)}
        plain = connect(stack.redis_url)
        lease = keys.lease(TopicName.from_full(FAILOVER_TOPIC))
        baseline, delays = [], []
        with sluice.Client(stack.redis_url) as client:
            consumer = client.subscribe(
                FAILOVER_TOPIC, "sub", consumer_type=sluice.ConsumerType.Shared
            )
            producer = client.create_producer(FAILOVER_TOPIC, block_if_queue_full=True)
            first_delivery(producer, consumer, "warm")
            for k in range(kills):
                for _ in range(3):
                    baseline.append(first_delivery(producer, consumer, f"alive{k}"))
                owner = current_owner(plain, lease)
                workers.pop(owner).kill()
                delays.append(first_delivery(producer, consumer, f"after{k}"))
                name = f"w{k + 2}"
                workers[name] = stack.start_worker(name)
        plain.close()
    return [
        {
            "measure": "produce -> deliver, owner alive (baseline)",
            "samples": len(baseline),
            "p50 s": percentile(baseline, 0.5),
            "p99 s": percentile(baseline, 0.99),
            "max s": max(baseline),
        },
        {
            "measure": f"SIGKILL owner -> first delivery by new owner ({LEASE_TTL:g} s lease)",
            "samples": len(delays),
            "p50 s": percentile(delays, 0.5),
            "p99 s": percentile(delays, 0.99),
            "max s": max(delays),
        },
    ]


def consume(url: str, count: int, result) -> None:
    """Consumer process: receive and ack ``count`` messages; put msg/s."""
    with sluice.Client(url) as client:
        consumer = client.subscribe(SCALE_TOPIC, "sub", consumer_type=sluice.ConsumerType.Shared)
        started = None
        for _ in range(count):
            message = consumer.receive(timeout_millis=60_000)
            started = started or time.perf_counter()
            consumer.acknowledge(message)
        consumer.close()
        result.put((count - 1) / (time.perf_counter() - started))


def measure_scaling(count: int) -> list[dict]:
    rows = []
    with Stack(worker=False) as stack:
        stack.setup_namespace()
        with stack.admin() as http:
            http.put(
                "/admin/v2/persistent/bench/ns/scale/partitions", json=PARTITIONS
            ).raise_for_status()
            http.put("/admin/v2/persistent/bench/ns/scale/subscription/sub").raise_for_status()
        plain = connect(stack.redis_url)
        base = TopicName.from_full(SCALE_TOPIC)
        for n in (1, 2, 3):
            stack.start_worker(f"s{n}")
            # Wait until the new worker holds its share (every partition leased).
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                owners = {plain.get(keys.lease(base.partition(i))) for i in range(PARTITIONS)}
                if None not in owners and len({o.rpartition(b":")[0] for o in owners}) == n:
                    break
                time.sleep(0.2)
            with sluice.Client(stack.redis_url) as client:
                producer = client.create_producer(
                    SCALE_TOPIC, batching_enabled=True, block_if_queue_full=True
                )
                for i in range(count):
                    producer.send_async(b"x" * 256, None)
                    if i % 5000 == 4999:
                        producer.flush()
                producer.flush()
            result = mp.Queue()
            process = mp.Process(target=consume, args=(stack.redis_url, count, result))
            process.start()
            rate = result.get(timeout=300)
            process.join(30)
            rows.append({"workers": n, "msg/s": rate})
        plain.close()
    for row in rows:
        row["ratio to 1 worker"] = row["msg/s"] / rows[0]["msg/s"]
    return rows


def main() -> None:
    args = arguments(__doc__.split("\n")[0])
    report(
        "Failover: worker killed -> partition dispatched again",
        measure_failover(5 if args.quick else 20),
        args.json,
    )
    report(
        "Dispatch throughput by number of workers (6 partitions, one consumer process)",
        measure_scaling(10_000 if args.quick else 60_000),
        None,
    )


if __name__ == "__main__":
    main()
