"""What owning N partitions costs a worker, and how fast a dead worker's N partitions move.

    python -m bench.lease_scale [--quick]

Leases have no TTL and are not renewed: a worker's heartbeat in the registry stands for all
of them, and the assignment is computed again only when the live set or the catalog changes.
So, without traffic, the Redis commands and the CPU that ownership costs must not grow with
the partitions owned.  Two measurements, each with its smallest N as the baseline of the run:

1. **Ownership alone, up to 100,000 partitions.**  A member process runs the worker's
   ``LeaseOwnership`` over the worker's ``Catalog``, whose topic registry (``sl:{meta}:topics``)
   holds topics of up to 10,000 partitions adding up to N, as the admin service registers them;
   it runs no partition (no dispatchers, no stats).  Alone on a private redis-server, its
   commands a second over a quiet window are Redis's ``INFO commandstats`` deltas (commands
   scripts run included; also per heartbeat, which does not depend on where the window
   falls), and its CPU share of one core comes from ``/proc``.  Failover: a
   second member joins and takes its share, the first is killed with SIGKILL, and the time
   from the kill until the survivor holds all N leases is taken from the survivor's own
   report (same monotonic clock).  Bound: the lease TTL plus a third of it.
2. **A ``sluice worker`` process** (admin service, PostgreSQL, the worker's partition runners
   and stats), N up to 10,000 (topics of 1,000 partitions created over the admin API): the
   worker's commands a second with no traffic, in total (commandstats) and on its control
   connections (those that carried a heartbeat: heartbeat, leases, change events; commands
   sent, attributed with ``MONITOR``), its CPU
   share, and the time from a SIGKILL of one of two workers until the other holds every
   lease.  The total and the CPU grow with N: each owned partition's stats document and
   housekeeping (``workers/stats.py``, ``workers/partition.py``) cost Redis calls every
   second or ten.  The control connections' share is what ownership costs.

Leases of 3 s (the default): a heartbeat every second.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import redis

from bench.harness import ROOT, Stack, report, wait_http
from bench.many_subscriptions import cpu_seconds
from server.embedded_redis import EmbeddedRedis, free_port
from server.processes import wait_or_kill
from sluice.protocol import keys
from sluice.protocol.names import TopicName
from sluice.protocol.scripts import WORKER_HEARTBEAT

LEASE_TTL = 3.0
TOPIC_SIZE = 10_000  # partitions per registered topic (the per-topic hard maximum)
API_TOPIC_SIZE = 1_000  # partitions per topic created over the admin API (its default bound)
HEARTBEAT_SHA = WORKER_HEARTBEAT.sha


# --- a member: LeaseOwnership over the worker's catalog, nothing else ------------------------


async def run_member(worker_id: str, url: str, ttl: float) -> None:
    """Own this member's share of the registry's partitions until SIGTERM; print ``held
    <count> <monotonic>`` whenever the leases held change (when the worker would
    rebalance)."""
    from redis.asyncio import Redis

    from dataplane.scripts import register_scripts
    from models.settings import Settings
    from workers.catalog import Catalog
    from workers.context import OwnershipHooks, WorkerContext
    from workers.leases import LeaseOwnership
    from workers.policy import PolicyState

    client = Redis.from_url(url)
    context = WorkerContext(
        worker_id,
        Settings(redis_url=url),
        client,
        client,
        register_scripts(client),
        PolicyState(None),  # type: ignore[arg-type]  # no policies read
    )
    catalog = Catalog(context, sessions=None)  # type: ignore[arg-type]
    await catalog.load_registry()
    ownership = LeaseOwnership(ttl)

    def report_held() -> None:
        print(f"held {len(ownership.tokens)} {time.monotonic():.6f}", flush=True)

    async def rebalance() -> None:  # called whenever the leases held change
        report_held()

    async def recover() -> bool:
        return True

    hooks = OwnershipHooks(catalog.partitions, rebalance, recover, lambda: catalog.version)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await ownership.join(context, hooks)
    await ownership.start()
    report_held()
    await stop.wait()
    await ownership.stop()
    await client.aclose()


class Member:
    """A member process, and what it reported."""

    def __init__(self, worker_id: str, url: str, folder: Path) -> None:
        self.id = worker_id
        self.held = 0
        self.reports: list[tuple[int, float]] = []
        self._log = open(folder / f"member-{worker_id}.log", "w")  # noqa: SIM115
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.lease_scale", "member", worker_id, url, str(LEASE_TTL)],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            kind, count, at = line.split()
            if kind == "held":
                self.held = int(count)
                self.reports.append((int(count), float(at)))

    def holding(self, count: int, timeout: float = 600.0) -> None:
        """Wait until the member holds ``count`` leases."""
        deadline = time.monotonic() + timeout
        while self.held != count:
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"member {self.id} holds {self.held}, not {count}")
            time.sleep(0.02)

    def first_report_of(self, count: int, after: float) -> float:
        """When the member first reported holding ``count`` leases after ``after``."""
        return next(at for held, at in self.reports if held == count and at >= after)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            wait_or_kill(self.process, 60)
        self._log.close()


def commandstats(plain: redis.Redis) -> int:
    """Commands Redis ran so far (those scripts ran included), but INFO's own."""
    stats = plain.info("commandstats")
    return sum(int(v["calls"]) for k, v in stats.items() if k != "cmdstat_info")


def heartbeats(plain: redis.Redis) -> int:
    """Heartbeats so far: each runs one ``ZSCORE`` (nothing else does without traffic)."""
    return int(plain.info("commandstats").get("cmdstat_zscore", {}).get("calls", 0))


def register(plain: redis.Redis, partitions: int) -> None:
    """Topics adding up to ``partitions`` in the topic registry, as the admin service writes
    them (``dataplane.catalog.topic_record``)."""
    from dataplane.catalog import topic_record

    mapping = {}
    for i, start in enumerate(range(0, partitions, TOPIC_SIZE)):
        topic = TopicName("bench", "lease", f"t{i}")
        mapping[topic.full] = topic_record(min(TOPIC_SIZE, partitions - start))
    plain.hset(keys.TOPICS, mapping=mapping)


def measure_ownership(sizes: list[int], window: float) -> list[dict]:
    rows = []
    folder = Path(tempfile.mkdtemp(prefix="sluice-lease-scale-"))
    server = EmbeddedRedis(folder / "redis")
    server.start()
    plain = redis.Redis.from_url(server.url)
    try:
        for n in sizes:
            plain.flushall()
            register(plain, n)
            first = Member("a", server.url, folder)
            second = None
            try:
                started = time.monotonic()
                first.holding(n)
                took = time.monotonic() - started
                time.sleep(2.0)
                counted, cpu_before, at = (
                    commandstats(plain),
                    cpu_seconds(first.process.pid),
                    time.time(),
                )
                beats = heartbeats(plain)
                time.sleep(window)
                seconds = time.time() - at
                beats = heartbeats(plain) - beats
                counted = commandstats(plain) - counted
                per_beat = counted / beats if beats else float("nan")
                commands = counted / seconds
                cpu = (cpu_seconds(first.process.pid) - cpu_before) / seconds
                second = Member("b", server.url, folder)
                deadline = time.monotonic() + 600
                while first.held + second.held != n or not first.held or not second.held:
                    if time.monotonic() > deadline:
                        raise RuntimeError("the two members did not settle")
                    time.sleep(0.05)
                time.sleep(LEASE_TTL / 3)  # a heartbeat of each on the settled state
                killed = time.monotonic()
                first.process.send_signal(signal.SIGKILL)
                second.holding(n, timeout=60)
                failover = second.first_report_of(n, killed) - killed
            finally:
                first.stop()
                if second is not None:
                    second.stop()
            rows.append(
                {
                    "partitions": n,
                    "start -> all held s": took,
                    "idle commands/s": commands,
                    "commands per heartbeat": per_beat,
                    "idle CPU % of a core": 100 * cpu,
                    "failover s": failover,
                    "bound s (TTL + TTL/3)": LEASE_TTL * 4 / 3,
                }
            )
    finally:
        plain.close()
        server.stop()
    base = rows[0]
    for row in rows:
        row["per heartbeat ratio"] = row["commands per heartbeat"] / base["commands per heartbeat"]
        row["failover ratio"] = row["failover s"] / base["failover s"]
    return rows


# --- real worker processes -------------------------------------------------------------------


def monitor(url: str, seconds: float) -> tuple[dict[str, int], set[str]]:
    """Commands sent by each client address over ``seconds`` (``MONITOR``), and the addresses
    that sent a heartbeat (the workers' control connections)."""
    plain = redis.Redis.from_url(url)
    sent: dict[str, int] = {}
    control: set[str] = set()
    connection = plain.connection_pool.get_connection()
    try:
        connection.send_command("MONITOR")
        connection.read_response()  # OK
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if not connection.can_read(timeout=0.1):
                continue
            line = connection.read_response()
            line = line.decode(errors="replace") if isinstance(line, bytes) else str(line)
            parts = line.split(" ", 4)
            if len(parts) < 4:
                continue
            client = parts[2].rstrip("]")
            if client == "lua":
                continue  # a script's own commands: counted with the call that ran it
            sent[client] = sent.get(client, 0) + 1
            if parts[3].strip('"').upper() == "EVALSHA" and HEARTBEAT_SHA in line:
                control.add(client)
    finally:
        connection.disconnect()
        plain.connection_pool.release(connection)
        plain.close()
    return sent, control


def control_addresses(url: str, seconds: float) -> tuple[dict[str, int], set[str]]:
    """``monitor`` over at least one heartbeat of every control connection in use."""
    return monitor(url, max(seconds, LEASE_TTL))


def lease_holders(plain: redis.Redis, partitions: list[TopicName]) -> set[str]:
    """The workers holding the partitions' leases (None for a free one)."""
    holders: set[str] = set()
    for start in range(0, len(partitions), 5000):
        pipe = plain.pipeline(transaction=False)
        for p in partitions[start : start + 5000]:
            pipe.get(keys.lease(p))
        for token in pipe.execute():
            holders.add(token.decode().rpartition(":")[0] if token else "")
    return holders


def start_worker(stack: Stack, worker_id: str) -> subprocess.Popen:
    """``Stack.start_worker`` with room for starting thousands of partition runners."""
    port = free_port()
    env = {"SLUICE_WORKER_HTTP_PORT": str(port), "SLUICE_WORKER_ID": worker_id}
    process = stack._spawn(["worker"], {**stack.worker_env, **env})
    wait_http(f"http://127.0.0.1:{port}/readyz", timeout=900)
    return process


def measure_worker(sizes: list[int], window: float) -> list[dict]:
    rows = []
    env = {"SLUICE_WORKER_LEASE_TTL_SECONDS": str(LEASE_TTL)}
    for n in sizes:
        with Stack(worker=False, worker_env=env) as stack:
            stack.setup_namespace("bench", "lease")
            partitions = []
            with stack.admin() as http:
                for i, start in enumerate(range(0, n, API_TOPIC_SIZE)):
                    count = min(API_TOPIC_SIZE, n - start)
                    http.put(f"/admin/v2/persistent/bench/lease/t{i}/partitions", json=count)
                    topic = TopicName("bench", "lease", f"t{i}")
                    partitions += [topic.partition(k) for k in range(count)]
            plain = redis.Redis.from_url(stack.redis_url)
            try:
                started = time.monotonic()
                first = start_worker(stack, "w1")
                deadline = time.monotonic() + 900
                while lease_holders(plain, partitions) != {"w1"}:
                    if time.monotonic() > deadline:
                        raise RuntimeError("w1 did not take every partition")
                    time.sleep(0.5)
                took = time.monotonic() - started
                time.sleep(3.0)
                counted, cpu_before, at = commandstats(plain), cpu_seconds(first.pid), time.time()
                time.sleep(window)
                seconds = time.time() - at
                commands = (commandstats(plain) - counted) / seconds
                cpu = (cpu_seconds(first.pid) - cpu_before) / seconds
                sent, control = control_addresses(stack.redis_url, window)
                heard = max(window, LEASE_TTL)
                control_rate = sum(c for a, c in sent.items() if a in control) / heard
                start_worker(stack, "w2")
                deadline = time.monotonic() + 900
                while lease_holders(plain, partitions) != {"w1", "w2"}:
                    if time.monotonic() > deadline:
                        raise RuntimeError("w2 did not take its share")
                    time.sleep(0.5)
                time.sleep(LEASE_TTL / 3)
                killed = time.monotonic()
                first.send_signal(signal.SIGKILL)
                while lease_holders(plain, partitions) != {"w2"}:
                    if time.monotonic() > killed + 120:
                        raise RuntimeError("w2 did not take w1's partitions")
                    time.sleep(0.02)
                failover = time.monotonic() - killed
            finally:
                plain.close()
        rows.append(
            {
                "partitions": n,
                "start -> all held s": took,
                "idle commands/s": commands,
                "control connections commands/s": control_rate,
                "idle CPU % of a core": 100 * cpu,
                "failover s": failover,
            }
        )
    base = rows[0]
    for row in rows:
        row["commands ratio"] = row["idle commands/s"] / base["idle commands/s"]
        row["control ratio"] = (
            row["control connections commands/s"] / base["control connections commands/s"]
        )
    return rows


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "member":
        _, _, worker_id, url, ttl = sys.argv
        asyncio.run(run_member(worker_id, url, float(ttl)))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    parser.add_argument(
        "--part", choices=("ownership", "worker", "both"), default="both", help="what to run"
    )
    args = parser.parse_args()
    quick = args.quick
    window = 10.0 if quick else 20.0
    if args.part in ("ownership", "both"):
        report(
            f"Lease ownership alone: idle cost and failover by partitions owned "
            f"({LEASE_TTL:g} s leases; ratios to the first row)",
            measure_ownership([200, 2_000] if quick else [1_000, 10_000, 100_000], window),
            args.json,
        )
    if args.part in ("worker", "both"):
        report(
            f"sluice worker processes: idle cost and failover by partitions owned "
            f"({LEASE_TTL:g} s leases; ratios to the first row)",
            measure_worker([200, 2_000] if quick else [1_000, 10_000], window),
            None,
        )


if __name__ == "__main__":
    main()
