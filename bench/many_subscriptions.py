"""Many subscriptions on one worker: 1,000 at 10 msg/s each, and 10,000 at 1 msg/s each.

Topics x 20 subscriptions, namespace ``subscriptionDispatchRate``, a backlog deeper than the
run on every topic.  Consumers keep permits but do not receive, so the figures are the
worker's dispatch alone, read exactly from its books: every few hundred ms one atomic read of
every subscription's limiter period (start, quota left) with its dispatched counter, from
which each period's deliveries follow exactly (see ``bench.throttle_accuracy``).

Reported: per-subscription utilisation (delivered / what the limit allows over the periods
observed; mean, p5, min), the largest period of any subscription, the largest "aggregate
period" (the sum over subscriptions of their k-th period) against the aggregate limit plus
one entry per subscription, and the worker process's CPU (share of one core) and memory.

    python -m bench.many_subscriptions [--quick]
"""

from __future__ import annotations

import os
import time

import sluice
from bench.harness import Stack, arguments, mean, percentile, report
from bench.throttle_accuracy import books_periods, fill
from sluice.protocol import keys
from sluice.protocol.connection import connect
from sluice.protocol.names import TopicName

PER_TOPIC = 20
# One atomic read of (period start, quota left, permits, dispatched) for every subscription.
SAMPLE = """
local out = {}
for i = 1, #KEYS, 2 do
  local lim = redis.call('HMGET', KEYS[i], 'mws', 'mav', 'mpm')
  out[#out + 1] = {lim[1] or '', lim[2] or '', lim[3] or '',
    redis.call('HGET', KEYS[i + 1], 'msg_out') or '0'}
end
return out
"""


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


def wait_recorded(stack: Stack, names: list[str], timeout: float = 300.0) -> None:
    """Wait until the admin API lists every subscription (the worker records subscriptions
    consumers create; the run measures the steady state that follows)."""
    deadline = time.monotonic() + timeout
    with stack.admin() as http:
        for name in names:
            path = f"/admin/v2/persistent/bench/ns/{name.rsplit('/', 1)[1]}/subscriptions"
            while len(http.get(path).json()) < PER_TOPIC:
                if time.monotonic() > deadline:
                    raise RuntimeError("subscriptions were not recorded in time")
                time.sleep(0.2)


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
        wait_recorded(stack, names)
        plain = connect(stack.redis_url)
        sample = plain.register_script(SAMPLE)
        sample_keys = []
        for c in consumers:
            partition = TopicName.from_full(c.topic())
            sample_keys += [
                keys.sub_key(partition, c.subscription_name(), "lim"),
                keys.sub_key(partition, c.subscription_name(), "stats"),
            ]
        worker_pid = stack.processes[-1].pid
        for name in names:
            fill(client, name, limit * (seconds + 10), 64)
        time.sleep(2.0)  # every subscription is in its periods now
        series: list[list[tuple]] = [[] for _ in consumers]
        every = 0.25 if subscriptions <= 2000 else 0.5
        cpu_before, started = cpu_seconds(worker_pid), time.monotonic()
        while time.monotonic() - started < seconds:
            now = time.monotonic()
            for index, (start, left, permits, sent) in enumerate(sample(keys=sample_keys)):
                if start:
                    series[index].append((float(start), int(float(left)), int(permits), int(sent)))
            time.sleep(max(0.0, every - (time.monotonic() - now)))
        elapsed = time.monotonic() - started
        cpu = (cpu_seconds(worker_pid) - cpu_before) / elapsed
        memory = rss_mib(worker_pid)
        for consumer in consumers:
            consumer.close()
        client.close()
    periods = [books_periods(samples) for samples in series]
    # Delivered over the whole periods observed, against what the limit allows in that time.
    utilisation = [
        sum(amounts) / (limit * sum(lengths)) if lengths else 0.0 for amounts, lengths in periods
    ]
    idle = sum(1 for amounts, _lengths in periods if not amounts)
    count = min(len(amounts) for amounts, _lengths in periods)
    aggregate = [sum(amounts[k] for amounts, _lengths in periods) for k in range(count)]
    allowed = limit * subscriptions
    label = f"{subscriptions:,} subscriptions at {limit} msg/s"
    return [
        {
            "scenario": label,
            "measure": "per-subscription utilisation (mean / p5 / min; never dispatched)",
            "value": f"{mean(utilisation):.3f} / {percentile(utilisation, 0.05):.3f} / "
            f"{min(utilisation):.3f}; {idle}",
        },
        {
            "scenario": label,
            "measure": "largest aggregate period / aggregate limit (bound: + 1 entry per sub)",
            "value": f"{max(aggregate, default=0):,} / {allowed:,} "
            f"(bound {allowed + subscriptions:,})",
        },
        {
            "scenario": label,
            "measure": "largest single period / limit (any subscription); shortest period",
            "value": f"{max(max(a, default=0) for a, _l in periods)} / {limit}; "
            f"{min(min(lengths, default=1) for _a, lengths in periods):.3f} s",
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
