"""Throttling accuracy at every rate: per-period deliveries vs the limit, and the strict bound.

For limits from 100 msg/s to 100,000 msg/s and 1 MB/s and 50 MB/s: produce a backlog deeper
than the run, then subscribe (from the earliest entry) and receive with one consumer process.
Two views of the same run:

* the consumer's: arrival times counted from just before ``subscribe`` was called.  The strict
  bound says that by T seconds at most LIMIT x (floor(T) + 1) may have arrived; reported is
  the largest excess over it (entries; the design allows none for message limits and one
  entry per period for byte limits), and the rate received;
* the worker's books, exactly: every 5 ms one atomic read of the topic limiter's period (its
  start and what it has left) together with the subscription's dispatched counter.  What a
  period handed out is the counter at the start of the next period minus the counter at its
  own start (each start known exactly: the counter then, less what the period had used when
  read).  Reported: the largest period / limit, the shortest period (never under 1 s), and
  the mean utilisation of whole periods (target at least 0.98 where the machine can
  deliver the rate).

A rate the consumer process cannot receive on this machine shows as utilisation under 1 with
no excess: the rate received says so; it is not a throttling error.

    python -m bench.throttle_accuracy [--quick]
"""

from __future__ import annotations

import itertools
import math
import multiprocessing as mp
import threading
import time

import sluice
from bench.harness import Stack, arguments, mean, report
from sluice.protocol import keys
from sluice.protocol.connection import connect
from sluice.protocol.frames import wake_data
from sluice.protocol.names import TopicName

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


SAMPLE = """
local t = redis.call('TIME')
local lim = redis.call('HMGET', KEYS[1], ARGV[1] .. 'ws', ARGV[1] .. 'av', ARGV[1] .. 'pm')
return {lim[1] or '', lim[2] or '', lim[3] or '', redis.call('HGET', KEYS[2], ARGV[2]) or '0'}
"""


def sample_books(url: str, topic: str, unit: str, stop: threading.Event, out: list) -> None:
    """(period start, quota left, permits, dispatched so far) of the TOPIC limiter and the
    subscription, read atomically every 5 ms."""
    client = connect(url)
    name = TopicName.from_full(topic)
    script = client.register_script(SAMPLE)
    script_keys = [keys.limiter(name), keys.sub_key(name, "acc", "stats")]
    args = ["m", "msg_out"] if unit == "msg" else ["b", "bytes_out"]
    while not stop.is_set():
        start, left, permits, sent = script(keys=script_keys, args=args)
        if start:
            out.append((float(start), int(float(left)), int(permits), int(sent)))
        time.sleep(0.005)
    client.close()


def books_periods(samples: list) -> tuple[list[int], list[float]]:
    """What each whole period handed out, and each period's length (s), from the samples."""
    starts: list[tuple[float, int]] = []  # (period start ms, dispatched when it started)
    for start, left, permits, sent in samples:
        if not starts or start != starts[-1][0]:
            starts.append((start, sent - (permits - left)))
    amounts = [b[1] - a[1] for a, b in itertools.pairwise(starts)]
    lengths = [(b[0] - a[0]) / 1000 for a, b in itertools.pairwise(starts)]
    return amounts, lengths


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
    sampler = threading.Thread(
        target=sample_books, args=(stack.redis_url, topic, unit, stop, books)
    )
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
    handed, lengths = books_periods(books)
    # Received in the whole seconds after the first arrival (a period starts at each).
    whole = seconds - 1
    first = arrivals[0][0]
    achieved = sum(amount or n for at, n in arrivals if at < first + whole) / whole
    return {
        "limit": label,
        "excess over strict bound (entries)": max(excess_entries, 0.0),
        "periods (books)": len(handed),
        "max period / limit (books)": max(handed) / limit if handed else float("nan"),
        "shortest period, s (books)": min(lengths) if lengths else float("nan"),
        "mean utilisation (books)": mean([v / limit for v in handed]),
        "received per s (consumer)": achieved if unit == "msg" else f"{achieved / 1e6:.2f} MB",
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
