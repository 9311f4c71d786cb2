"""Many subscriptions on one worker: 1,000 at 10 msg/s, 10,000 at 1 msg/s, 100,000 at 0.1 msg/s.

Topics x 20 subscriptions, namespace ``subscriptionDispatchRate`` (0.1 msg/s is one message
per 10 s period: ``dispatchThrottlingRateInMsg=1, ratePeriodInSecond=10``), a backlog deeper
than the run on every topic.  Consumers keep permits but do not receive, so the figures are
the worker's dispatch alone, read exactly from its books: every few hundred ms (2 s for 10 s
periods) one atomic read per subscription of its limiter period (start, quota left) with its
dispatched counter, from which each period's deliveries follow exactly (see
``bench.throttle_accuracy``); the reads go in batches of subscriptions, so no one call holds
Redis for long.

The consumers live in processes of their own (``bench.consumers``), so their heartbeats do not
run in the measuring process; they heartbeat every 1 s (1,000 subscriptions), 5 s (10,000) and
20 s (100,000), the worker releasing consumers silent for six heartbeats (at least 10 s), so
that the client side of 100,000 consumers fits on the machine next to the worker.

The partitions sleep while their consumers subscribe (no data yet); the fill wakes them all
at once, and the measurement starts once every subscription has dispatched (how long that
took is reported); the consumers' permits and the backlog last for that ramp (at most
``RAMP_TIMEOUT``) and the window.  A sampling round slower than a period (a loaded machine)
sees two period starts k periods apart: such a span may hand out k quotas.

Reported: per-subscription utilisation (delivered / what the limit allows over the periods
observed; mean, p5, min; target p5 >= 0.98), the periods over the strict bound (a period
handing out more than the limit; target none), the largest period of any subscription, the
largest "aggregate period" (the sum over subscriptions of their k-th period) against the
aggregate limit plus one entry per subscription, and the worker process's CPU (share of one
core; target < 0.5 core at 10,000 subscriptions) and memory, and the Redis server's CPU
over the window (which the sampling reads share).

    python -m bench.many_subscriptions [--quick] [--rows 10000,100000]
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx

import sluice
from bench.consumers import ConsumerOptions, ConsumerPool
from bench.harness import Stack, mean, percentile, report
from bench.throttle_accuracy import fill
from sluice.protocol import keys
from sluice.protocol.connection import connect
from sluice.protocol.names import TopicName

PER_TOPIC = 20
BATCH = 2000  # subscriptions per sampling call
WORKER_CPU_TARGET = 0.5  # core, at 10,000 subscriptions
UTILISATION_TARGET = 0.98  # p5
RAMP_TIMEOUT = 120.0  # s, from the fill until every subscription has dispatched, at most
SETTLE_SECONDS = 5.0  # s, from then until the window starts
# One atomic read of (period start, quota left, permits, dispatched) for each subscription.
SAMPLE = """
local out = {}
for i = 1, #KEYS, 2 do
  local lim = redis.call('HMGET', KEYS[i], 'mws', 'mav', 'mpm')
  out[#out + 1] = {lim[1] or '', lim[2] or '', lim[3] or '',
    redis.call('HGET', KEYS[i + 1], 'msg_out') or '0'}
end
return out
"""


@dataclass(frozen=True)
class Scenario:
    """One row group: topics x ``PER_TOPIC`` subscriptions limited to ``permits`` messages
    per ``period`` seconds, observed for ``seconds``."""

    topics: int
    permits: int
    period: int
    seconds: int
    heartbeat: float
    consumer_processes: int

    @property
    def subscriptions(self) -> int:
        return self.topics * PER_TOPIC

    @property
    def label(self) -> str:
        rate = self.permits / self.period
        return f"{self.subscriptions:,} subscriptions at {rate:g} msg/s"

    @property
    def cpu_target(self) -> str:
        if self.subscriptions == 10_000:
            return f"< {WORKER_CPU_TARGET} core"
        return "stated" if self.subscriptions > 10_000 else "-"


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


def create_topics(stack: Stack, names: list[str], concurrency: int = 4) -> None:
    """Create the non-partitioned topics over REST, ``concurrency`` callers at a time."""
    local = threading.local()

    def one(name: str) -> None:
        if not hasattr(local, "http"):
            local.http = httpx.Client(base_url=stack.admin_url, timeout=300)
        local.http.put("/admin/v2/persistent/bench/ns/" + name.rsplit("/", 1)[1]).raise_for_status()

    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, names))


def wait_recorded(stack: Stack, names: list[str], timeout: float) -> None:
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


class Books:
    """Each subscription's periods as its limiter's books show them: for every period seen,
    its start (ms) and the dispatched counter when it started."""

    def __init__(self, count: int) -> None:
        self.starts: list[list[tuple[float, int]]] = [[] for _ in range(count)]

    def note(self, index: int, start: float, left: int, permits: int, sent: int) -> None:
        """One sample of subscription ``index``."""
        seen = self.starts[index]
        if not seen or start != seen[-1][0]:
            seen.append((start, sent - (permits - left)))

    def periods(self, index: int) -> tuple[list[int], list[float]]:
        """What each whole period handed out, and each period's length (s)."""
        seen = self.starts[index]
        pairs = list(itertools.pairwise(seen))
        return [b[1] - a[1] for a, b in pairs], [(b[0] - a[0]) / 1000 for a, b in pairs]


def scenario(case: Scenario) -> list[dict]:
    """Run one scenario; its rows of figures."""
    subscriptions = case.subscriptions
    timeout_s = max(10.0, 6 * case.heartbeat)
    env = {"SLUICE_CONSUMER_TIMEOUT_SECONDS": str(timeout_s)}
    # Permits (and backlog) for the ramp as well as the window: a subscription dispatched
    # early must not run out of permits while the others catch up (its periods would count
    # as unused).
    queue = case.permits * (math.ceil((case.seconds + RAMP_TIMEOUT) / case.period) + 10)
    names = [f"persistent://bench/ns/many{t}" for t in range(case.topics)]
    specs = [(name, f"s{s}") for name in names for s in range(PER_TOPIC)]
    options = ConsumerOptions(
        heartbeat_seconds=case.heartbeat,
        receiver_queue_size=queue,
        per_client=max(250, int(250 * case.heartbeat)),
    )
    began = time.monotonic()
    with Stack(worker_env=env) as stack:
        progress(case, f"stack up in {time.monotonic() - began:.0f} s")
        stack.setup_namespace()
        started = time.monotonic()
        create_topics(stack, names)
        with stack.admin() as http:
            http.post(
                "/admin/v2/namespaces/bench/ns/subscriptionDispatchRate",
                json={
                    "dispatchThrottlingRateInMsg": case.permits,
                    "ratePeriodInSecond": case.period,
                },
            ).raise_for_status()
        created = time.monotonic() - started
        with ConsumerPool(stack.redis_url, case.consumer_processes, options) as pool:
            started = time.monotonic()
            pool.add(specs)
            subscribed = time.monotonic() - started
            wait_recorded(stack, names, timeout=max(300.0, subscriptions / 50))
            progress(case, f"created {created:.0f} s, subscribed {subscribed:.0f} s, recorded")
            plain = connect(stack.redis_url)
            sample = plain.register_script(SAMPLE)
            sample_keys = []
            for topic, subscription in specs:
                partition = TopicName.from_full(topic)
                sample_keys += [
                    keys.sub_key(partition, subscription, "lim"),
                    keys.sub_key(partition, subscription, "stats"),
                ]
            batches = [
                (offset // 2, sample_keys[offset : offset + 2 * BATCH])
                for offset in range(0, len(sample_keys), 2 * BATCH)
            ]
            worker_pid = stack.processes[-1].pid
            with sluice.Client(stack.redis_url) as client:
                for name in names:
                    fill(client, name, queue, 64)
            progress(case, "filled")
            began = time.monotonic()
            first_dispatch = wait_all_dispatched(sample, batches, timeout=RAMP_TIMEOUT)
            progress(case, f"every subscription dispatched {first_dispatch:.1f} s after the fill")
            # In their periods now, and the worker's heap settled: it collects and freezes
            # it once its dispatchers stop changing (``workers.gcpolicy.HeapSettler``: 2 s
            # after the last partition woke, a pause of about a second at 10,000).
            time.sleep(SETTLE_SECONDS)
            books = Books(subscriptions)
            every = 2.0 if case.period >= 10 else 0.25 if subscriptions <= 2000 else 0.5
            errors_before, fenced_before = errors(plain), fenced(plain)
            redis_process = getattr(stack.redis, "process", None)  # None on a cluster
            redis_pid = redis_process.pid if redis_process is not None else None
            redis_before = cpu_seconds(redis_pid) if redis_pid else 0.0
            cpu_before, started = cpu_seconds(worker_pid), time.monotonic()
            while time.monotonic() - started < case.seconds:
                now = time.monotonic()
                for first, batch in batches:
                    for offset, (start, left, permits, sent) in enumerate(sample(keys=batch)):
                        if start:
                            books.note(
                                first + offset,
                                float(start),
                                int(float(left)),
                                int(permits),
                                int(sent),
                            )
                time.sleep(max(0.0, every - (time.monotonic() - now)))
            elapsed = time.monotonic() - started
            cpu = (cpu_seconds(worker_pid) - cpu_before) / elapsed
            redis_cpu = (cpu_seconds(redis_pid) - redis_before) / elapsed if redis_pid else -1.0
            memory = rss_mib(worker_pid)
            health = Health(
                running=running_partitions(stack),
                partitions=case.topics,
                errors=errors(plain) - errors_before,
                fenced=fenced(plain) - fenced_before,
                seconds=elapsed,
            )
            plain.close()
    setup = (created, subscribed, first_dispatch)
    return rows_of(case, books, (cpu, redis_cpu), memory, health, setup)


def wait_all_dispatched(sample, batches: list, timeout: float) -> float:
    """Seconds until every subscription's limiter has a period (it dispatched once): the
    partitions slept while their consumers subscribed, and the fill woke them all at once.
    The measurement starts after that (inf when not all did within ``timeout``)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if all(start for _first, batch in batches for start, *_rest in sample(keys=batch)):
            return time.monotonic() - started
        time.sleep(0.1)
    return math.inf


def progress(case: Scenario, what: str) -> None:
    """A line on stderr about a long scenario's progress."""
    print(f"{time.strftime('%H:%M:%S')} {case.label}: {what}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Health:
    """Whether the worker held its partitions through the window: the partitions it ran at
    the end (its /metrics) of those there are, and Redis's error replies (FENCED: a dispatch
    or trim refused for a lease lost) during the window."""

    running: int | None
    partitions: int
    errors: float
    fenced: float
    seconds: float

    def text(self) -> str:
        running = "?" if self.running is None else f"{self.running:,}"
        return (
            f"{running} of {self.partitions:,}; {self.errors / self.seconds:,.1f}/s "
            f"({self.fenced / self.seconds:,.1f}/s FENCED)"
        )


def errors(client) -> float:
    """Error replies Redis has sent."""
    return float(client.info("stats").get("total_error_replies", 0))


def fenced(client) -> float:
    """FENCED error replies Redis has sent."""
    return float(client.info("errorstats").get("errorstat_FENCED", {}).get("count", 0))


def running_partitions(stack: Stack) -> int | None:
    """Partitions the worker runs (``sluice_worker_owned_partitions`` on its /metrics)."""
    try:
        answer = httpx.get(f"http://127.0.0.1:{stack.worker_port}/metrics", timeout=10)
    except httpx.HTTPError:
        return None
    for line in answer.text.splitlines():
        if line.startswith("sluice_worker_owned_partitions"):
            return int(float(line.split()[-1]))
    return None


def rows_of(
    case: Scenario,
    books: Books,
    cpus: tuple[float, float],
    memory: float,
    health: Health,
    setup: tuple[float, float, float],
) -> list[dict]:
    """The rows of one scenario (``setup``: seconds to create the topics, to subscribe, and
    from the fill until every subscription had dispatched; ``cpus``: the worker's and the
    Redis server's CPU over the window, share of one core, -1 when not measured)."""
    created, subscribed, first_dispatch = setup
    cpu, redis_cpu = cpus
    subscriptions, permits = case.subscriptions, case.permits
    periods = [books.periods(i) for i in range(subscriptions)]
    # Delivered over the whole periods observed, against what the limit allows in that time.
    utilisation = [
        sum(amounts) / (permits * sum(lengths) / case.period) if lengths else 0.0
        for amounts, lengths in periods
    ]
    idle = sum(1 for amounts, _lengths in periods if not amounts)
    count = min(len(amounts) for amounts, _lengths in periods)
    aggregate = [sum(amounts[k] for amounts, _lengths in periods) for k in range(count)]
    allowed = permits * subscriptions
    # Two period starts sampled in a row may be k periods apart when a sampling round took
    # longer than a period (a loaded machine): every period lasts at least its length, so a
    # span of k whole periods is at least k periods long and may hand out k quotas.
    every = [
        (amount, max(1, math.floor(length / case.period + 1e-9)))
        for amounts, lengths in periods
        for amount, length in zip(amounts, lengths, strict=True)
    ]
    over = [amount - permits * k for amount, k in every if amount > permits * k]
    label = case.label

    def row(measure: str, value: str, target: str = "-") -> dict:
        return {"scenario": label, "measure": measure, "value": value, "target": target}

    return [
        row(
            "setup: topics created, consumers subscribed (s); consumer heartbeat (s)",
            f"{created:.0f}, {subscribed:.0f}; {case.heartbeat:g}",
        ),
        row(
            "from the fill (every partition asleep) until every subscription dispatched (s)",
            f"{first_dispatch:.1f}",
        ),
        row(
            "per-subscription utilisation (mean / p5 / min; no whole period seen)",
            f"{mean(utilisation):.3f} / {percentile(utilisation, 0.05):.3f} / "
            f"{min(utilisation):.3f}; {idle}",
            f"p5 >= {UTILISATION_TARGET}",
        ),
        row(
            f"periods over the strict bound ({permits} per {case.period} s): count of "
            "periods observed; largest excess",
            f"{len(over)} of {len(every):,}; {max(over, default=0)}",
            "none",
        ),
        row(
            "largest aggregate period / aggregate limit (bound: + 1 entry per sub)",
            f"{max(aggregate, default=0):,} / {allowed:,} (bound {allowed + subscriptions:,})",
        ),
        row(
            "largest single period / limit (any subscription); shortest period",
            f"{max((amount for amount, _k in every), default=0)} / {permits}; "
            f"{min(min(lengths, default=case.period) for _a, lengths in periods):.3f} s",
        ),
        row("worker CPU (share of one core)", f"{cpu:.2f}", case.cpu_target),
        row("worker memory (RSS, MiB)", f"{memory:.0f}"),
        row(
            "Redis server CPU (share of one core; the benchmark's sampling included)",
            f"{redis_cpu:.2f}" if redis_cpu >= 0 else "not measured",
        ),
        row(
            "partitions the worker runs at the end; Redis error replies in the window",
            health.text(),
            "all; no FENCED",
        ),
    ]


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    parser.add_argument(
        "--rows", help="only the scenarios of these subscription counts, e.g. 10000,100000"
    )
    return parser.parse_args()


def main() -> None:
    args = parse_arguments()
    if args.quick:
        cases = [
            Scenario(5, 10, 1, 5, 1.0, 1),
            Scenario(25, 1, 1, 5, 1.0, 1),
            Scenario(25, 1, 10, 25, 1.0, 1),
        ]
    else:
        cases = [
            Scenario(50, 10, 1, 20, 1.0, 1),
            Scenario(500, 1, 1, 20, 5.0, 2),
            Scenario(5000, 1, 10, 60, 20.0, 4),
        ]
    if args.rows:
        wanted = {int(n) for n in args.rows.split(",")}
        cases = [case for case in cases if case.subscriptions in wanted]
    rows = []
    for case in cases:
        rows += scenario(case)
    load = " ".join(f"{v:.2f}" for v in os.getloadavg())
    report("Many limited subscriptions on one worker", rows, args.json)
    print(f"\nLoad average (1/5/15 min) at the end: {load} (the machine may be shared).")


if __name__ == "__main__":
    main()
