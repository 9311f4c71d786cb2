"""Chaos soak: unplanned faults under throttled, durable traffic, and what users are promised.

    python -m bench.soak --chaos [--minutes 30] [--quick] [--seed 7]

A deployment of its own: a 3-master + 3-replica Redis Cluster (node timeout 2 s), a private
PostgreSQL server, ``sluice api`` and two ``sluice worker`` processes (1.5 s leases).  A
4-partition topic in a namespace with ``durableAcks`` (1 replica) and a dispatch rate of
``LIMIT`` msg/s per partition; four producer threads send synchronously, alternating 10 s at
1.5 x the limit and 10 s at 0.5 x, so the limit binds half of the time; a Shared consumer
receives and acknowledges; hostile admin traffic runs throughout beside a prober that reads an
applied policy every 50 ms.  Every ``--every`` seconds (60; quick: 12) one fault, in a shuffled
cycle of:

* ``kill-worker``: SIGKILL a worker, start it again at once;
* ``pause-worker``: SIGSTOP a worker for twice the lease TTL, then SIGCONT;
* ``kill-master``: SIGKILL the Redis master of a partition (no planned failover); the cluster
  promotes its replica; the node is started again 5 s later and rejoins as a replica;
* ``restart-postgres``: ``pg_ctl restart -m immediate`` of the admin service's database.

At the end the limit is lifted to drain the backlog, and it reports: acknowledged sends and
failed ones, received (unique), acknowledged but lost (the promise: 0), duplicates against the
redeliveries the stats count, the strict bound per partition (by T seconds after the
subscription exists at most LIMIT x (floor(T) + 1) received: deliveries over it; the busiest
second of dispatch, from the subscription's dispatch counter sampled every 0.1 s, which two
periods bound; and the busiest second of receipts, which consumer stalls blur), the admin
prober's p50/p99/max, hostile answers by class (503 is the promised answer while PostgreSQL
restarts; any other 5xx is a failure) and the faults injected.  ``--quick`` runs 90 s (every
kind of fault at least once) and is part of ``make bench-smoke``.
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx

import sluice
from bench.harness import percentile, report
from bench.soak import Hostile
from server.embedded_cluster import EmbeddedCluster
from server.embedded_redis import free_port
from sluice.protocol import keys
from sluice.protocol.connection import connect
from sluice.protocol.names import TopicName
from tests.cluster.processes import sluice as spawn
from tests.cluster.traffic import Receiver, SyncSenders, busiest_window
from tests.faults.postgres import RestartablePostgres

TOPIC = "persistent://bench/ns/chaos"
PARTITIONS = 4
LIMIT = 50  # msg/s per partition
LEASE_TTL = 1.5
FAULTS = ("kill-worker", "pause-worker", "kill-master", "restart-postgres")


class Senders(SyncSenders):
    """Producer threads sending synchronously at a rate that alternates every 10 s."""

    def per_thread_rate(self) -> float:
        high = int((time.monotonic() - self.started) / 10) % 2 == 0
        total = PARTITIONS * LIMIT * (1.5 if high else 0.5)
        return total / len(self.producers)


class Deployment:
    """Cluster, PostgreSQL, admin service and two workers of the soak's own."""

    def __init__(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="sluice-chaos-"))
        self.cluster = EmbeddedCluster(self.tmp / "cluster", masters=3, replicas=1)
        self.postgres = RestartablePostgres()
        self.port = free_port()
        self.admin_url = f"http://127.0.0.1:{self.port}"
        self.workers: dict[str, subprocess.Popen] = {}
        self.processes: list[subprocess.Popen] = []

    def env(self) -> dict[str, str]:
        return {
            "DATABASE_URL": self.postgres.url,
            "REDIS_URL": self.cluster.url,
            "SLUICE_WORKER_LEASE_TTL_SECONDS": str(LEASE_TTL),
            "SLUICE_WORKER_HTTP_PORT": "0",
        }

    def start(self) -> Deployment:
        self.cluster.start()
        self.postgres.start()
        api = spawn(
            "--log-level",
            "warning",
            "api",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            env=self.env(),
            log=self.tmp / "api.log",
        )
        self.processes.append(api)
        deadline = time.monotonic() + 60
        while True:
            try:
                ready = httpx.get(f"{self.admin_url}/admin/v2/brokers/ready", timeout=1)
                if ready.status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError((self.tmp / "api.log").read_text()[-2000:])
            time.sleep(0.2)
        for worker_id in ("c1", "c2"):
            self.start_worker(worker_id)
        return self

    def start_worker(self, worker_id: str) -> None:
        env = {**self.env(), "SLUICE_WORKER_ID": worker_id}
        process = spawn(
            "--log-level", "warning", "worker", env=env, log=self.tmp / f"{worker_id}.log"
        )
        self.workers[worker_id] = process
        self.processes.append(process)

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(18)  # SIGCONT: a paused worker must be able to stop
                process.terminate()
        for process in self.processes:
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        self.cluster.stop()
        self.postgres.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


class Chaos:
    """Injects one fault at a time, in a shuffled cycle of every kind."""

    def __init__(self, deployment: Deployment, seed: int) -> None:
        self.deployment = deployment
        self.pick = random.Random(seed)
        self.cycle: list[str] = []
        self.injected: Counter[str] = Counter()
        self.errors: list[str] = []
        self.timeline: list[tuple[float, str]] = []  # (wall-clock ms at injection, fault)

    def next(self) -> None:
        if not self.cycle:
            self.cycle = list(FAULTS)
            self.pick.shuffle(self.cycle)
        fault = self.cycle.pop()
        self.timeline.append((time.time() * 1000, fault))
        try:
            getattr(self, fault.replace("-", "_"))()
            self.injected[fault] += 1
        except Exception as exc:  # reported: a fault that could not be injected
            self.errors.append(f"{fault}: {exc}")

    def kill_worker(self) -> None:
        worker_id = self.pick.choice(sorted(self.deployment.workers))
        self.deployment.workers[worker_id].kill()
        self.deployment.start_worker(worker_id)

    def pause_worker(self) -> None:
        process = self.deployment.workers[self.pick.choice(sorted(self.deployment.workers))]
        process.send_signal(19)  # SIGSTOP
        time.sleep(2 * LEASE_TTL)
        process.send_signal(18)  # SIGCONT

    def kill_master(self) -> None:
        cluster = self.deployment.cluster
        partition = TopicName.from_full(TOPIC).partition(self.pick.randrange(PARTITIONS))
        master = cluster.node_of_key(keys.log(partition))
        cluster.kill(master)
        cluster.wait_promoted(master, keys.log(partition))
        time.sleep(5)
        cluster.restart(master)
        cluster.wait_replicas()

    def restart_postgres(self) -> None:
        self.deployment.postgres.restart_immediately()


class DispatchCounter:
    """Samples every partition's dispatch counter (the subscription's ``msg_out``, written by
    ``dispatch.lua`` in the same call that hands entries out) every 0.1 s: the dispatch side of
    the limit, which no consumer stall can blur."""

    def __init__(self, redis_url: str, stop: threading.Event) -> None:
        self.redis = connect(redis_url)
        self.stop = stop
        self.samples: dict[int, list[tuple[float, int]]] = {i: [] for i in range(PARTITIONS)}
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        base = TopicName.from_full(TOPIC)
        while not self.stop.is_set():
            for index in range(PARTITIONS):
                stats = keys.sub_key(base.partition(index), "chaos", "stats")
                try:
                    value = self.redis.hget(stats, "msg_out")
                except Exception:  # that partition's master is down: no sample
                    continue
                self.samples[index].append((time.monotonic(), int(value or 0)))
            time.sleep(0.1)

    def busiest_second(self) -> int:
        """The most any partition dispatched within one second (samples 0.1 s apart)."""
        best = 0
        for samples in self.samples.values():
            start = 0
            for at, count in samples:
                while at - samples[start][0] > 1.0:
                    start += 1
                best = max(best, count - samples[start][1])
        return best

    def close(self) -> None:
        self._thread.join(5)
        self.redis.close()


def locate(redis_url: str, missing: set[bytes], timeline: list[tuple[float, str]]) -> str:
    """Where acknowledged sends that never arrived are: per partition, their entry ids (the
    write time, Redis's clock), the fault injected last before the first of them, and what the
    subscription's pending list says of them (to whom, delivered how often)."""
    redis = connect(redis_url)
    base = TopicName.from_full(TOPIC)
    found: dict[int, list[str]] = {}
    try:
        for index in range(PARTITIONS):
            log = keys.log(base.partition(index))
            start = "-"
            while True:
                rows = redis.xrange(log, start, "+", count=10_000)
                for entry_id, fields in rows:
                    if fields.get(b"d") in missing:
                        found.setdefault(index, []).append(entry_id.decode())
                if len(rows) < 10_000:
                    break
                start = "(" + rows[-1][0].decode()
        parts = [f"{len(missing) - sum(map(len, found.values()))} not in any log"]
        for index, ids in sorted(found.items()):
            first_ms = int(ids[0].split("-")[0])
            before = [(at, fault) for at, fault in timeline if at <= first_ms]
            pending = redis.xpending_range(
                keys.log(base.partition(index)), "chaos", ids[0], ids[-1], len(ids) + 10
            )
            holders = Counter(
                (p["consumer"].decode(), p["times_delivered"]) for p in pending
            ).most_common(3)
            last = (
                f"{before[-1][1]} {(first_ms - before[-1][0]) / 1000:.1f} s earlier"
                if before
                else "none"
            )
            parts.append(
                f"partition {index}: {len(ids)} in the log, {ids[0]} .. {ids[-1]}; last fault "
                f"before the first: {last}; pending {len(pending)} (consumer, deliveries): "
                f"{holders}"
            )
        return "; ".join(parts)
    except Exception as exc:  # a diagnosis, never the reason the run fails
        return f"not located: {exc!r}"
    finally:
        redis.close()


def strict_bound_excess(arrivals: list[float]) -> int:
    """Deliveries beyond LIMIT x (floor(T) + 1) at their arrival, T seconds from the start."""
    over = 0
    for count, at in enumerate(sorted(arrivals), start=1):
        over = max(over, count - LIMIT * (int(at) + 1))
    return over


def run(minutes: float, quick: bool, every: float | None, seed: int) -> dict:
    seconds = 90.0 if quick else minutes * 60
    every = every or (12.0 if quick else 60.0)
    deployment = Deployment().start()
    stop = threading.Event()
    try:
        admin = httpx.Client(base_url=deployment.admin_url, timeout=30)
        admin.put("/admin/v2/tenants/bench", json={"allowedClusters": ["standalone"]})
        admin.put("/admin/v2/namespaces/bench/ns").raise_for_status()
        admin.put("/admin/v2/namespaces/bench/guarded").raise_for_status()
        admin.post(
            "/admin/v2/namespaces/bench/guarded/dispatchRate",
            json={"dispatchThrottlingRateInMsg": 100},
        ).raise_for_status()
        guarded_before = admin.get("/admin/v2/namespaces/bench/guarded/dispatchRate").json()
        admin.post(
            "/admin/v2/namespaces/bench/ns/durableAcks", json={"replicas": 1, "timeoutMs": 1000}
        ).raise_for_status()
        rate_path = "/admin/v2/namespaces/bench/ns/dispatchRate"
        admin.post(rate_path, json={"dispatchThrottlingRateInMsg": LIMIT}).raise_for_status()
        admin.put(
            "/admin/v2/persistent/bench/ns/chaos/partitions", json=PARTITIONS
        ).raise_for_status()
        client = sluice.Client(deployment.cluster.url)
        receiver = Receiver(client, TOPIC, subscription="chaos")
        hostile = Hostile(
            deployment.admin_url,
            stop,
            probe="/admin/v2/persistent/bench/ns/chaos/dispatchRate?applied=true",
        )
        hostile.start()
        dispatched = DispatchCounter(deployment.cluster.url, stop)
        senders = Senders(client, TOPIC).start()
        chaos = Chaos(deployment, seed)
        started = time.monotonic()
        next_fault = started + every / 2
        while time.monotonic() - started < seconds:
            if time.monotonic() >= next_fault:
                chaos.next()
                next_fault = max(next_fault + every, time.monotonic() + 2)
            time.sleep(0.1)
        senders.stop()
        limited_until = time.monotonic() - receiver.origin
        busiest_dispatch = dispatched.busiest_second()
        admin.delete(rate_path)  # drain what is left
        deadline = time.monotonic() + 120
        while set(senders.acked) - set(receiver.seen) and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(1)  # a late duplicate would come now
        receiver.stop()
        stop.set()
        hostile.join()
        dispatched.close()
        stats = admin.get("/admin/v2/persistent/bench/ns/chaos/partitioned-stats").json()
        redelivered = stats["subscriptions"]["chaos"].get("msgRedeliverCounter", 0)
        guarded_after = admin.get("/admin/v2/namespaces/bench/guarded/dispatchRate").json()
        missing = set(senders.acked) - set(receiver.seen)
        where_lost = locate(deployment.cluster.url, missing, chaos.timeline) if missing else "-"
        admin.close()
        client.close()
    finally:
        stop.set()
        deployment.stop()
    arrivals = {
        p: [t for t in times if t <= limited_until] for p, times in receiver.arrivals.items()
    }
    lost = len(set(senders.acked) - set(receiver.seen))
    return {
        "minutes": seconds / 60,
        "acknowledged sends": len(senders.acked),
        "failed sends": senders.failed,
        "received (unique)": len(receiver.seen),
        "acknowledged but lost": lost,
        "duplicates": receiver.duplicates,
        "redeliveries (stats)": redelivered,
        "deliveries over the strict bound": max(
            (strict_bound_excess(a) for a in arrivals.values()), default=0
        ),
        "busiest 1 s of dispatch / limit (bound 2 periods)": busiest_dispatch / LIMIT,
        "busiest 1 s window of receipts / limit": max(
            (busiest_window(a) / LIMIT for a in arrivals.values()), default=float("nan")
        ),
        "admin probe p50 ms": percentile(hostile.probe_ms, 0.5),
        "admin probe p99 ms": percentile(hostile.probe_ms, 0.99),
        "admin probe max ms": max(hostile.probe_ms, default=float("nan")),
        "hostile answers": ", ".join(f"{k} {v}" for k, v in sorted(hostile.answers.items())),
        "guarded policy unchanged": guarded_before == guarded_after,
        "faults injected": ", ".join(f"{k} {v}" for k, v in sorted(chaos.injected.items())),
        "faults that failed to inject": "; ".join(chaos.errors) or "none",
        "where the lost sends are": where_lost,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chaos", action="store_true", help="(how bench.soak calls this)")
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--quick", action="store_true", help="90 s")
    parser.add_argument("--every", type=float, help="seconds between faults")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    row = run(args.minutes, args.quick, args.every, args.seed)
    report(
        f"Chaos soak: {row['minutes']:g} min of unplanned faults under throttled, durable traffic",
        [row],
        args.json,
    )


if __name__ == "__main__":
    main()
