"""Many subscriptions on one worker: 1,000 subscriptions limited to 10 msg/s each.

50 topics x 20 subscriptions, namespace ``subscriptionDispatchRate`` 10 msg/s, a backlog
deeper than the run on every topic.  Consumers keep permits but do not receive, so the
figure is the worker's dispatch alone.  Every second the dispatched counters of all
subscriptions are read; reported: aggregate delivered vs the aggregate limit (10,000 msg/s),
per-subscription utilisation, and the worker process's CPU (share of one core).

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

LIMIT = 10


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    args = arguments(__doc__.split("\n")[0])
    topics, per_topic = (10, 10) if args.quick else (50, 20)
    seconds = 5 if args.quick else 20
    with Stack() as stack:
        stack.setup_namespace()
        names = [f"persistent://bench/ns/many{t}" for t in range(topics)]
        with stack.admin() as http:
            for name in names:
                http.put("/admin/v2/persistent/bench/ns/" + name.rsplit("/", 1)[1])
            http.post(
                "/admin/v2/namespaces/bench/ns/subscriptionDispatchRate",
                json={"dispatchThrottlingRateInMsg": LIMIT, "ratePeriodInSecond": 1},
            )
        client = sluice.Client(stack.redis_url)
        consumers = [
            client.subscribe(
                name,
                f"s{s}",
                consumer_type=sluice.ConsumerType.Shared,
                receiver_queue_size=LIMIT * (seconds + 5),
            )
            for name in names
            for s in range(per_topic)
        ]
        time.sleep(2.0)  # the worker starts a dispatcher per subscription
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
            fill(client, name, LIMIT * (seconds + 5), 64)
        time.sleep(1.5)  # every subscription is in its periods now
        before, cpu_before, started = read(), cpu_seconds(worker_pid), time.monotonic()
        aggregate = []
        last = before
        for _ in range(seconds):
            time.sleep(1.0)
            now = read()
            aggregate.append(sum(now) - sum(last))
            last = now
        elapsed = time.monotonic() - started
        cpu = (cpu_seconds(worker_pid) - cpu_before) / elapsed
        per_sub = [(b - a) / (LIMIT * elapsed) for a, b in zip(before, last, strict=True)]
        for consumer in consumers:
            consumer.close()
        client.close()
    total_limit = LIMIT * len(consumers)
    report(
        f"{len(consumers)} subscriptions at {LIMIT} msg/s each on one worker",
        [
            {
                "measure": "aggregate delivered per second / aggregate limit",
                "mean": mean([a / total_limit for a in aggregate]),
                "min": min(aggregate) / total_limit,
                "max": max(aggregate) / total_limit,
            },
            {
                "measure": "per-subscription utilisation over the run",
                "mean": mean(per_sub),
                "min": min(per_sub),
                "max": max(per_sub),
            },
            {"measure": "worker CPU (share of one core)", "mean": cpu, "min": cpu, "max": cpu},
            {
                "measure": "per-subscription utilisation p5",
                "mean": percentile(per_sub, 0.05),
                "min": percentile(per_sub, 0.05),
                "max": percentile(per_sub, 0.05),
            },
        ],
        args.json,
    )


if __name__ == "__main__":
    main()
