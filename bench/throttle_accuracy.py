"""Throttling accuracy: per-period deliveries vs the limit, with a deep backlog.

For limits of 100, 1,000 and 10,000 msg/s and 1 MB/s (1 KiB messages): produce a backlog
deeper than the run, then receive with one consumer and count what arrives in each
one-second period (periods start at the first delivery, as the limiter's do).  Reported:
the largest over-delivery in any period (entries; the design allows one entry) and the mean
utilisation of full periods (delivered / limit; target at least 98%).  Periods are counted
around the limiter's own period starts (first delivery + k seconds).

    python -m bench.throttle_accuracy [--quick]
"""

from __future__ import annotations

import multiprocessing as mp
import time

import sluice
from bench.harness import Stack, arguments, mean, report
from models import keys
from models.names import TopicName
from models.protocol import wake_data

SCENARIOS = [
    ("100 msg/s", {"dispatchThrottlingRateInMsg": 100}, 100, 64, "msg"),
    ("1,000 msg/s", {"dispatchThrottlingRateInMsg": 1000}, 1000, 64, "msg"),
    ("10,000 msg/s", {"dispatchThrottlingRateInMsg": 10_000}, 10_000, 64, "msg"),
    (
        "1 MB/s (1 KiB messages)",
        {"dispatchThrottlingRateInByte": 1_000_000},
        1_000_000,
        1024,
        "byte",
    ),
]


def fill(client: sluice.Client, topic: str, count: int, size: int) -> None:
    """Produce ``count`` messages of ``size`` bytes, many entries per call."""
    name = TopicName.from_full(topic)
    script_keys = [keys.log(name), keys.partition_stats(name), keys.idle(name)]
    payload = b"a" * size
    for start in range(0, count, 500):
        n = min(500, count - start)
        args = [keys.WAKE_CHANNEL, wake_data(name.full), n]
        for _ in range(n):
            args += [1, "d", payload]
        client.scripts["produce"](keys=script_keys, args=args)


def receive(url: str, topic: str, count: int, seconds: float, ready, go, result) -> None:
    """Consumer process: timestamps and sizes of what arrives within ``seconds``."""
    with sluice.Client(url) as client:
        consumer = client.subscribe(topic, "acc", consumer_type=sluice.ConsumerType.Exclusive)
        ready.set()
        go.wait()
        arrivals: list[tuple[float, int]] = []
        deadline = None
        while len(arrivals) < count:
            try:
                message = consumer.receive(timeout_millis=200)
            except sluice.Timeout:
                if deadline is not None and time.monotonic() > deadline:
                    break
                continue
            now = time.monotonic()
            if deadline is None:
                deadline = now + seconds
            if now > deadline:
                break
            arrivals.append((now, len(message.data())))
            consumer.acknowledge(message)
        result.put(arrivals)


def measure(stack: Stack, index: int, scenario, periods: int) -> dict:
    label, body, limit, size, unit = scenario
    topic = f"persistent://bench/ns/acc{index}"
    with stack.admin() as http:
        http.put(f"/admin/v2/persistent/bench/ns/acc{index}")
    context = mp.get_context("spawn")
    ready, go, result = context.Event(), context.Event(), context.Queue()
    per_second = limit if unit == "msg" else limit // size
    count = per_second * (periods + 3)
    process = context.Process(
        target=receive, args=(stack.redis_url, topic, count, periods + 0.5, ready, go, result)
    )
    process.start()
    ready.wait(60)
    with stack.admin() as http:
        http.post(
            f"/admin/v2/persistent/bench/ns/acc{index}/dispatchRate",
            json={**body, "ratePeriodInSecond": 1},
        ).raise_for_status()
    time.sleep(1.0)  # let the worker apply it
    go.set()  # the consumer receives from the first dispatch on: periods line up
    with sluice.Client(stack.redis_url) as client:
        fill(client, topic, count, size)
    arrivals = result.get(timeout=600)
    process.join(60)
    # Deliveries cluster at each period's start (first delivery + k s); bucket boundaries sit
    # half a period away from those clusters so receive jitter cannot move a cluster.
    start = arrivals[0][0]
    buckets: dict[int, int] = {}
    for at, nbytes in arrivals:
        period = int(at - start + 0.5)
        buckets[period] = buckets.get(period, 0) + (1 if unit == "msg" else nbytes)
    full = [buckets.get(p, 0) for p in range(periods)]
    over = max(value - limit for value in full)
    return {
        "limit": label,
        "periods": periods,
        "max over-delivery": f"{max(over, 0)} {'msgs' if unit == 'msg' else 'B'}"
        f" ({max(over, 0) / (1 if unit == 'msg' else size):.1f} entries)",
        "max period / limit": max(full) / limit,
        "min period / limit": min(full) / limit,
        "mean utilisation": mean([v / limit for v in full]),
    }


def main() -> None:
    args = arguments(__doc__.split("\n")[0])
    periods = 4 if args.quick else 20
    rows = []
    with Stack() as stack:
        stack.setup_namespace()
        for index, scenario in enumerate(SCENARIOS):
            rows.append(measure(stack, index, scenario, periods))
    report(
        "Throttling accuracy per one-second period (deep backlog, one consumer)", rows, args.json
    )


if __name__ == "__main__":
    main()
