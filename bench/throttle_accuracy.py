"""Throttling accuracy at every rate: per-period deliveries vs the limit, and the strict bound.

For limits from 100 msg/s to 100,000 msg/s and 1 MB/s and 50 MB/s: produce a backlog deeper
than the run, then subscribe (from the earliest entry) and receive with one consumer process.
Two views of the same run:

* the consumer's: arrival times counted from just before ``subscribe`` was called.  The strict
  bound says that by T seconds at most LIMIT x (floor(T) + 1) may have arrived; reported is
  the largest excess over it (entries; the design allows none for message limits and one
  entry per period for byte limits).  Per-period counts start at the first arrival;
* the worker's books: the subscription's dispatched counters sampled every 10 ms, counted in
  periods from the first dispatch.

Reported per limit: the largest period / limit from both views, the mean utilisation of full
periods (target at least 0.98 where the machine can deliver the rate), and the rate actually
achieved.  A rate the consumer process cannot receive on this machine shows as utilisation
under 1 on both views with no excess: say so rather than read it as a throttling error.

    python -m bench.throttle_accuracy [--quick]
"""

from __future__ import annotations

import math
import multiprocessing as mp
import threading
import time

import redis

import sluice
from bench.harness import Stack, arguments, mean, report
from models import keys
from models.names import TopicName
from models.protocol import wake_data

SCENARIOS = [
    ("100 msg/s", {"dispatchThrottlingRateInMsg": 100}, 100, 64, "msg"),
    ("1,000 msg/s", {"dispatchThrottlingRateInMsg": 1000}, 1000, 64, "msg"),
    ("10,000 msg/s", {"dispatchThrottlingRateInMsg": 10_000}, 10_000, 64, "msg"),
    ("50,000 msg/s", {"dispatchThrottlingRateInMsg": 50_000}, 50_000, 64, "msg"),
    ("100,000 msg/s", {"dispatchThrottlingRateInMsg": 100_000}, 100_000, 64, "msg"),
    ("1 MB/s (1 KiB messages)", {"dispatchThrottlingRateInByte": 1_000_000}, 1_000_000, 1024, "b"),
    (
        "50 MB/s (16 KiB messages)",
        {"dispatchThrottlingRateInByte": 50_000_000},
        50_000_000,
        16384,
        "b",
    ),
]


def fill(client: sluice.Client, topic: str, count: int, size: int) -> None:
    """Produce ``count`` messages of ``size`` bytes, many entries per call."""
    name = TopicName.from_full(topic)
    script_keys = [keys.log(name), keys.partition_stats(name), keys.idle(name)]
    payload = b"a" * size
    per_call = max(1, min(500, 2_000_000 // size))
    for start in range(0, count, per_call):
        n = min(per_call, count - start)
        args = [keys.WAKE_CHANNEL, wake_data(name.full), n]
        for _ in range(n):
            args += [1, "d", payload]
        client.scripts["produce"](keys=script_keys, args=args)


def receive(url: str, topic: str, seconds: float, go, result) -> None:
    """Consumer process: subscribe when told, then arrival times (from just before the
    subscribe call) and sizes of what arrives within ``seconds``."""
    with sluice.Client(url) as client:
        go.wait()
        origin = time.monotonic()
        consumer = client.subscribe(
            topic,
            "acc",
            consumer_type=sluice.ConsumerType.Exclusive,
            initial_position=sluice.InitialPosition.Earliest,
        )
        arrivals: list[tuple[float, int]] = []
        deadline = origin + seconds
        while True:
            now = time.monotonic()
            if now > deadline:
                break
            try:
                message = consumer.receive(timeout_millis=100)
            except sluice.Timeout:
                continue
            arrivals.append((time.monotonic() - origin, len(message.data())))
            consumer.acknowledge(message)
        consumer.close()
        result.put(arrivals)


def sample_books(url: str, topic: str, stop: threading.Event, out: list) -> None:
    """The subscription's dispatched counters every 10 ms (the worker's books)."""
    client = redis.Redis.from_url(url)
    key = keys.sub_key(TopicName.from_full(topic), "acc", "stats")
    while not stop.is_set():
        values = client.hmget(key, "msg_out", "bytes_out")
        out.append((time.monotonic(), int(values[0] or 0), int(values[1] or 0)))
        time.sleep(0.01)
    client.close()


def periods(points: list[tuple[float, int]], count: int) -> list[int]:
    """Amounts per period from the first one; bucket edges half a period from the bursts."""
    if not points:
        return [0] * count
    start = points[0][0]
    buckets = [0] * count
    for at, amount in points:
        k = int(at - start + 0.5)
        if k < count:
            buckets[k] += amount
    return buckets


def measure(stack: Stack, index: int, scenario, seconds: int) -> dict:
    label, body, limit, size, unit = scenario
    local = f"acc{index}"
    topic = f"persistent://bench/ns/{local}"
    with stack.admin() as http:
        http.put(f"/admin/v2/persistent/bench/ns/{local}").raise_for_status()
        http.post(
            f"/admin/v2/persistent/bench/ns/{local}/dispatchRate",
            json={**body, "ratePeriodInSecond": 1},
        ).raise_for_status()
    per_second = limit if unit == "msg" else limit // size
    with sluice.Client(stack.redis_url) as client:
        fill(client, topic, per_second * (seconds + 3), size)
    context = mp.get_context("spawn")
    go, result = context.Event(), context.Queue()
    process = context.Process(
        target=receive, args=(stack.redis_url, topic, seconds + 1.5, go, result)
    )
    process.start()
    stop, books = threading.Event(), []
    sampler = threading.Thread(target=sample_books, args=(stack.redis_url, topic, stop, books))
    sampler.start()
    time.sleep(0.5)
    go.set()
    arrivals = result.get(timeout=600)
    process.join(60)
    stop.set()
    sampler.join()
    amount = 1 if unit == "msg" else None
    # The strict bound, from just before subscribe (entries; a byte limit's LIMIT in bytes).
    excess, received = 0.0, 0
    for at, nbytes in arrivals:
        received += amount or nbytes
        excess = max(excess, received - limit * (math.floor(at) + 1))
    excess_entries = excess if unit == "msg" else excess / size
    consumer = periods([(at, amount or nbytes) for at, nbytes in arrivals], seconds)
    column = 1 if unit == "msg" else 2
    steps = [
        (books[i][0], books[i][column] - books[i - 1][column])
        for i in range(1, len(books))
        if books[i][column] > books[i - 1][column]
    ]
    worker = periods(steps, seconds)
    full = consumer[: seconds - 1]
    return {
        "limit": label,
        "periods": seconds,
        "excess over strict bound (entries)": max(excess_entries, 0.0),
        "consumer: max period / limit": max(consumer) / limit,
        "worker books: max period / limit": max(worker) / limit,
        "consumer: mean utilisation": mean([v / limit for v in full]),
        "worker books: mean utilisation": mean([v / limit for v in worker[: seconds - 1]]),
        "achieved per s": mean(full) if unit == "msg" else f"{mean(full) / 1e6:.2f} MB",
    }


def main() -> None:
    args = arguments(__doc__.split("\n")[0])
    seconds = 4 if args.quick else 10
    scenarios = SCENARIOS[:3] + SCENARIOS[5:6] if args.quick else SCENARIOS
    rows = []
    with Stack() as stack:
        stack.setup_namespace()
        for index, scenario in enumerate(scenarios):
            rows.append(measure(stack, index, scenario, seconds))
    title = "Throttling accuracy per one-second period (deep backlog, one consumer)"
    report(title, rows, args.json)


if __name__ == "__main__":
    main()
