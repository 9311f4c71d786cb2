"""Many subscriptions on one worker: 1,000 at 10 msg/s each, and 10,000 at 1 msg/s each.

Topics x 20 subscriptions, namespace ``subscriptionDispatchRate``, a backlog deeper than the
run on every topic.  Consumers keep permits but do not receive, so the figures are the
worker's dispatch alone, read from its books: every subscription's dispatched counter is
sampled every 25 ms.  Each subscription's periods are counted from its own first delivery in
the run (its limiter's periods start there), with bucket edges half a period away from the
deliveries, which come as one burst at each period's start.

Reported: per-subscription utilisation of full periods (mean, p5, min), the largest
"aggregate period" (the sum over subscriptions of their k-th period) against the aggregate
limit plus one entry per subscription, and the worker process's CPU (share of one core) and
memory (RSS).

    python -m bench.many_subscriptions [--quick]
"""

from __future__ import annotations

import os
import time

import redis

import sluice
from bench.harness import Stack, arguments, mean, percentile, report
from bench.throttle_accuracy import fill
from models import keys
from models.names import TopicName

SAMPLE_SECONDS = 0.025
PER_TOPIC = 20


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    """Resident memory of a process, MiB."""
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def periods_of(samples: list[tuple[float, int]], count: int) -> list[int]:
    """Deliveries in each of ``count`` periods, counted from the first delivery seen."""
    steps = list(zip(samples[1:], samples, strict=False))
    start = next((t for (t, value), (_, before) in steps if value > before), None)
    if start is None:
        return [0] * count
    buckets = [0] * count
    for (t, value), (_, before) in steps:
        k = int(t - start + 0.5)
        if value > before and 0 <= k < count:
            buckets[k] += value - before
    return buckets


def scenario(topics: int, limit: int, seconds: int) -> list[dict]:
    """Run one scenario; its rows of figures."""
    subscriptions = topics * PER_TOPIC
    with Stack() as stack:
        stack.setup_namespace()
        names = [f"persistent://bench/ns/many{t}" for t in range(topics)]
        with stack.admin() as http:
            for name in names:
                http.put("/admin/v2/persistent/bench/ns/" + name.rsplit("/", 1)[1])
            http.post(
                "/admin/v2/namespaces/bench/ns/subscriptionDispatchRate",
                json={"dispatchThrottlingRateInMsg": limit, "ratePeriodInSecond": 1},
            ).raise_for_status()
        client = sluice.Client(stack.redis_url)
        consumers = [
            client.subscribe(
                name,
                f"s{s}",
                consumer_type=sluice.ConsumerType.Shared,
                receiver_queue_size=limit * (seconds + 10),
            )
            for name in names
            for s in range(PER_TOPIC)
        ]
        plain = redis.Redis.from_url(stack.redis_url)
        counters = [
            keys.sub_key(TopicName.from_full(c.topic()), c.subscription_name(), "stats")
            for c in consumers
        ]
        worker_pid = stack.processes[-1].pid

        def read() -> list[int]:
            pipe = plain.pipeline(transaction=False)
            for key in counters:
                pipe.hget(key, "msg_out")
            return [int(v or 0) for v in pipe.execute()]

        for name in names:
            fill(client, name, limit * (seconds + 10), 64)
        time.sleep(2.0)  # every subscription is in its periods now
        series: list[list[tuple[float, int]]] = [[] for _ in counters]
        cpu_before, started = cpu_seconds(worker_pid), time.monotonic()
        while time.monotonic() - started < seconds + 1.5:
            now = time.monotonic()
            for index, value in enumerate(read()):
                series[index].append((now, value))
            time.sleep(max(0.0, SAMPLE_SECONDS - (time.monotonic() - now)))
        elapsed = time.monotonic() - started
        cpu = (cpu_seconds(worker_pid) - cpu_before) / elapsed
        memory = rss_mib(worker_pid)
        for consumer in consumers:
            consumer.close()
        client.close()
    periods = [periods_of(samples, seconds) for samples in series]
    utilisation = [mean([p / limit for p in sub]) for sub in periods]
    aggregate = [sum(sub[k] for sub in periods) for k in range(seconds)]
    allowed = limit * subscriptions
    label = f"{subscriptions:,} subscriptions at {limit} msg/s"
    return [
        {
            "scenario": label,
            "measure": "per-subscription utilisation (mean / p5 / min)",
            "value": f"{mean(utilisation):.3f} / {percentile(utilisation, 0.05):.3f} / "
            f"{min(utilisation):.3f}",
        },
        {
            "scenario": label,
            "measure": "largest aggregate period / aggregate limit (bound: + 1 entry per sub)",
            "value": f"{max(aggregate):,} / {allowed:,} (bound {allowed + subscriptions:,})",
        },
        {
            "scenario": label,
            "measure": "largest single period / limit (any subscription)",
            "value": f"{max(max(sub) for sub in periods)} / {limit}",
        },
        {"scenario": label, "measure": "worker CPU (share of one core)", "value": f"{cpu:.2f}"},
        {"scenario": label, "measure": "worker memory (RSS, MiB)", "value": f"{memory:.0f}"},
    ]


def main() -> None:
    args = arguments(__doc__.split("\n")[0])
    seconds = 5 if args.quick else 20
    rows = scenario(5 if args.quick else 50, 10, seconds)
    rows += scenario(25 if args.quick else 500, 1, seconds)
    report("Many limited subscriptions on one worker", rows, args.json)


if __name__ == "__main__":
    main()
