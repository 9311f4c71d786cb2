"""Soak: a steady mix of produce, consume, policy changes and worker restarts.

    python -m bench.soak [--minutes 10] [--quick]

Two ``sluice worker`` processes share a 4-partition topic.  A producer sends about 800 msg/s
with sequence numbers; a Shared consumer receives and acks everything.  Every 10 s the
namespace dispatch rate flips between 250 and 150 msg/s per partition (1,000 and 600 msg/s
for the topic); every 60 s a worker is restarted, alternately with SIGTERM (graceful) and
SIGKILL.  At the end it reports lost and duplicated messages, the busiest second against the
limit in force (the baseline is the limit itself), and memory: the admin service's over the
whole run, and the most any worker grew during its life.
``--quick`` runs one minute.  Not part of CI.

``--chaos`` runs the chaos soak instead (``bench.chaos``: unplanned faults of workers, Redis
Cluster masters and PostgreSQL under throttled, durable traffic); its ``--quick`` mode is part
of ``make bench-smoke``.

``--hostile`` mixes hostile admin traffic into the run: about 20 requests/s drawn from
``HOSTILE`` (broken, huge, deeply nested or mistyped bodies, bad names, huge query strings,
forbidden partition counts, unknown fields), aimed at a namespace whose dispatch rate must
come out unchanged, while a prober reads an applied dispatch rate every 50 ms.  It adds the
hostile answers by class (a 5xx or a timeout is a failure), whether the guarded policy
changed, and the prober's latency.
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
from collections import Counter

import httpx

import sluice
from bench.harness import Stack, percentile, report

TOPIC = "persistent://bench/ns/soak"
PARTITIONS = 4
RATES = (250, 150)  # per partition, alternating every 10 s
PRODUCE_PER_SECOND = 800
GUARDED = "/admin/v2/namespaces/bench/guarded"
GUARDED_RATE = {"dispatchThrottlingRateInMsg": 100}
_NS = "/admin/v2/namespaces/bench"
_TOPIC = "/admin/v2/persistent/bench/guarded"
JSON = {"Content-Type": "application/json"}
# (method, path, body, headers): requests that must each get a 4xx and change nothing.
HOSTILE: tuple[tuple[str, str, bytes | None, dict[str, str] | None], ...] = (
    ("POST", f"{GUARDED}/dispatchRate", b'{"unknownField": 1}', JSON),
    ("POST", f"{GUARDED}/dispatchRate", b'{"dispatchThrottlingRateInMsgs": 5}', JSON),
    ("POST", f"{GUARDED}/dispatchRate", b'{"dispatchThrottlingRateInMsg": 1e400}', JSON),
    ("POST", f"{GUARDED}/dispatchRate", b'{"dispatchThrottlingRateInMsg": NaN}', JSON),
    ("POST", f"{GUARDED}/dispatchRate", b'{"ratePeriodInSecond": %d}' % 2**70, JSON),
    ("POST", f"{GUARDED}/dispatchRate", b'{"dispatchThrottlingRateInMsg": "5"}', JSON),
    ("POST", f"{GUARDED}/dispatchRate", b"[" * 20_000 + b"]" * 20_000, JSON),
    ("POST", f"{GUARDED}/dispatchRate", b'{"a":' * 5_000 + b"1" + b"}" * 5_000, JSON),
    ("POST", f"{GUARDED}/dispatchRate", b'{"dispatchThrottlingRateInMsg": 5', JSON),
    ("POST", f"{GUARDED}/dispatchRate", b"x" * 2_000_000, JSON),
    (
        "POST",
        f"{GUARDED}/dispatchRate",
        b'{"dispatchThrottlingRateInMsg": 5}',
        {"Content-Type": "text/plain"},
    ),
    (
        "POST",
        f"{GUARDED}/dispatchRate",
        b'{"ratePeriodInSecond": 0, "dispatchThrottlingRateInMsg": 5}',
        JSON,
    ),
    ("PUT", f"{_TOPIC}/huge/partitions", b"1000000000", JSON),
    ("PUT", f"{_TOPIC}/huge/partitions", b"-1", JSON),
    ("PUT", f"{_TOPIC}/huge/partitions", b"1.5", JSON),
    ("PUT", f"{_NS}/..", None, None),
    ("PUT", f"{_NS}/bad%00name", None, None),
    ("PUT", f"{_NS}/{'n' * 10_000}", None, None),
    ("GET", f"{_TOPIC}/t/stats?{'q=' + 'x' * 60_000}", None, None),
    ("GET", "/admin/v2/audit?limit=-5&since=yesterday", None, None),
    ("DELETE", f"{GUARDED}?force=maybe", None, None),
    ("PATCH", f"{GUARDED}/dispatchRate", b"{}", JSON),
    ("POST", "/admin/v2/brokers/configuration/maxNumPartitionsPerPartitionedTopic/0", None, None),
    ("POST", "/admin/v2/brokers/configuration/dispatchThrottlingRateInMsg/1e9", None, None),
)


class Hostile:
    """Sends ``HOSTILE`` requests at random and probes the admin service meanwhile."""

    def __init__(
        self,
        admin_url: str,
        stop: threading.Event,
        probe: str = "/admin/v2/persistent/bench/ns/soak/dispatchRate?applied=true",
    ) -> None:
        self.admin_url = admin_url
        self.stop = stop
        self.probe_path = probe
        self.answers: Counter[str] = Counter()
        self.probe_ms: list[float] = []
        self.threads = [
            threading.Thread(target=self._attack, daemon=True),
            threading.Thread(target=self._probe, daemon=True),
        ]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def join(self) -> None:
        for thread in self.threads:
            thread.join(30)

    def _attack(self) -> None:
        pick = random.Random(7)
        with httpx.Client(base_url=self.admin_url, timeout=10) as http:
            while not self.stop.is_set():
                method, path, body, headers = pick.choice(HOSTILE)
                try:
                    status = http.request(method, path, content=body, headers=headers).status_code
                    # 503 is the promised answer while a dependency is down; other 5xx are bugs.
                    self.answers["503" if status == 503 else f"{status // 100}xx"] += 1
                except httpx.TimeoutException:
                    self.answers["timeout"] += 1
                except httpx.HTTPError:
                    self.answers["connection error"] += 1
                time.sleep(0.05)

    def _probe(self) -> None:
        with httpx.Client(base_url=self.admin_url, timeout=10) as http:
            while not self.stop.is_set():
                started = time.perf_counter()
                try:
                    http.get(self.probe_path)
                    self.probe_ms.append((time.perf_counter() - started) * 1000)
                except httpx.HTTPError:
                    self.probe_ms.append(10_000.0)
                time.sleep(0.05)


def rss_kib(pid: int) -> int:
    """Resident memory of a process, KiB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main() -> None:
    if "--chaos" in sys.argv[1:]:
        from bench import chaos  # it uses this module's ``Hostile``

        chaos.main(sys.argv[1:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--quick", action="store_true", help="one minute")
    parser.add_argument("--hostile", action="store_true", help="mix in hostile admin traffic")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    seconds = 60.0 if args.quick else args.minutes * 60
    with Stack(worker=False) as stack:
        stack.setup_namespace()
        admin = stack.admin()
        admin.put(
            "/admin/v2/persistent/bench/ns/soak/partitions", json=PARTITIONS
        ).raise_for_status()

        def set_rate(per_partition: int) -> None:
            admin.post(
                "/admin/v2/namespaces/bench/ns/dispatchRate",
                json={"dispatchThrottlingRateInMsg": per_partition},
            ).raise_for_status()

        set_rate(RATES[0])
        if args.hostile:
            admin.put(GUARDED).raise_for_status()
            admin.post(f"{GUARDED}/dispatchRate", json=GUARDED_RATE).raise_for_status()
            guarded_before = admin.get(f"{GUARDED}/dispatchRate").json()
        workers = [stack.start_worker(f"soak{i}") for i in range(2)]
        api = stack.processes[0]
        api_start = rss_kib(api.pid)
        worker_start = {w.pid: rss_kib(w.pid) for w in workers}
        growth: list[int] = []
        stop = threading.Event()
        received: Counter[int] = Counter()
        per_second: Counter[int] = Counter()
        limits: dict[int, int] = {}
        produced = 0
        started = time.monotonic()
        client = sluice.Client(stack.redis_url)
        consumer = client.subscribe(TOPIC, "soak", consumer_type=sluice.ConsumerType.Shared)

        def consume() -> None:
            while True:
                try:
                    message = consumer.receive(timeout_millis=500)
                except sluice.Timeout:
                    if stop.is_set():
                        return
                    continue
                received[int(message.data())] += 1
                per_second[int(time.monotonic() - started)] += 1
                consumer.acknowledge(message)

        thread = threading.Thread(target=consume, daemon=True)
        thread.start()
        hostile = Hostile(stack.admin_url, stop) if args.hostile else None
        if hostile is not None:
            hostile.start()
        producer = client.create_producer(TOPIC, block_if_queue_full=True)
        restarts = 0
        next_flip, next_restart, rate_index = 10.0, 60.0, 0
        while (elapsed := time.monotonic() - started) < seconds:
            second = int(elapsed)
            limits.setdefault(second, RATES[rate_index] * PARTITIONS)
            for _ in range(PRODUCE_PER_SECOND // 20):
                producer.send_async(str(produced).encode(), None)
                produced += 1
            producer.flush()
            if elapsed >= next_flip:
                rate_index = 1 - rate_index
                set_rate(RATES[rate_index])
                next_flip += 10.0
            if elapsed >= next_restart:
                victim = workers.pop(0)
                growth.append(rss_kib(victim.pid) - worker_start[victim.pid])
                if restarts % 2:
                    victim.kill()
                else:
                    victim.terminate()
                victim.wait(30)
                restarts += 1
                workers.append(stack.start_worker(f"soak{restarts + 1}"))
                worker_start[workers[-1].pid] = rss_kib(workers[-1].pid)
                next_restart += 60.0
            time.sleep(max(0.0, 0.05 - (time.monotonic() - started - elapsed)))
        deadline = time.monotonic() + 120
        while len(received) < produced and time.monotonic() < deadline:
            time.sleep(0.5)
        stop.set()
        thread.join(10)
        extra: dict[str, object] = {}
        if hostile is not None:
            hostile.join()
            unchanged = admin.get(f"{GUARDED}/dispatchRate").json() == guarded_before
            extra = {
                "hostile answers": ", ".join(
                    f"{k} {v}" for k, v in sorted(hostile.answers.items())
                ),
                "guarded policy unchanged": unchanged,
                "admin probe p50 ms": percentile(hostile.probe_ms, 0.5),
                "admin probe p99 ms": percentile(hostile.probe_ms, 0.99),
                "admin probe max ms": max(hostile.probe_ms, default=float("nan")),
            }
        growth += [rss_kib(w.pid) - worker_start[w.pid] for w in workers]
        api_end = rss_kib(api.pid)
        client.close()
        admin.close()
    lost = produced - len(received)
    duplicates = sum(n - 1 for n in received.values())
    # A limit change applies within milliseconds; seconds in which it changed are skipped.
    steady = [s for s in per_second if limits.get(s) == limits.get(s - 1) == limits.get(s + 1)]
    worst = max((per_second[s] / limits[s] for s in steady if s in limits), default=float("nan"))
    hostile_title = ", hostile admin traffic" if args.hostile else ""
    report(
        f"Soak: {seconds / 60:g} min of produce, consume, policy flips and worker restarts"
        + hostile_title,
        [
            {
                "produced": produced,
                "received (unique)": len(received),
                "lost": lost,
                "duplicates": duplicates,
                "worker restarts": restarts,
                "busiest steady second / limit": worst,
                "admin RSS start MiB": api_start / 1024,
                "admin RSS end MiB": api_end / 1024,
                "max worker RSS growth in its life MiB": max(growth) / 1024,
                **extra,
            }
        ],
        args.json,
    )


if __name__ == "__main__":
    main()
