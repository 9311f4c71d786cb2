"""What quiet tenants cost: CPU, memory and admin latency against the number of idle partitions.

Steps of idle partitions (full: 0, 1,000, 10,000, 100,000; quick and ``--standalone``: 0,
1,000, 5,000; ``--steps`` for others), added one step after the other to the same
deployment: partitioned topics of 100 partitions spread round-robin over 20 namespaces of 4
tenants, each topic created with one REST call and its subscription with one more (the
subscription PUT on a partitioned topic creates it on every partition).  About 10% of the
partitions (one in ten, capped: ``--max-consumers``, 1,000 by default) get a connected Shared
consumer that never receives; the consumers live in a process of their own
(``bench.consumers``) and stay connected by heartbeating (one Redis call per consumer per
client heartbeat: a fifth of the consumer timeout, 2 s by default).  No message is ever
produced.

After each step the run waits until the worker reports owning every partition (the admin's
``/admin/v2/brokers/{cluster}/workers``, or the worker's ``sluice_worker_owned_partitions``
on its /metrics; or until those counts stop changing), lets the system settle, then measures
two windows of equal length:

* quiet: CPU of the worker, the admin service and Redis (``/proc/<pid>/stat``; Redis from
  ``INFO cpu``), the worker's RSS, Redis ``used_memory``, keys, commands/s and error
  replies/s (``INFO stats``);
* probed: 500 ``GET /admin/v2/brokers/health`` requests spread evenly over the window
  (latency from when each was due), and the CPU of everything again.

The 0-partition step is the baseline of the same run: the table gives per-partition memory
increments and per-1,000-partition CPU (as a total and as the increment over the baseline),
with the targets beside them.  ``--cluster`` puts the data on a 3-master Redis Cluster (CPU,
memory and commands summed over the masters; keys and commands per master show whether they
spread).  ``--standalone`` runs the real ``sluice standalone`` instead
(free ports, ``--no-reports`` unless ``--reports``, a data folder of its own): "Sluice" is
then its whole process tree (the admin service, its worker child, its embedded Redis child,
and with ``--reports`` its report scheduler); the RSS is the worker child's.

The processes measured inherit the environment, so a setting can be tried without code, e.g.
``SLUICE_WORKER_LEASE_TTL_SECONDS=30`` on a machine too loaded for the worker to renew 3 s
leases (the "FENCED" replies and the workers' counts in the table tell).

    python -m bench.idle_scale [--quick] [--standalone [--reports] | --cluster] [--steps 0,1000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import redis

from bench.consumers import ConsumerPool
from bench.harness import ROOT, Stack, percentile, report, stop_processes, wait_http
from bench.httpload import open_loop, prepare
from server.embedded_cluster import EmbeddedCluster
from server.embedded_redis import free_port

PARTITIONS_PER_TOPIC = 100
TENANTS = 4
NAMESPACES_PER_TENANT = 5
SUBSCRIPTION = "idle"
HEALTH = "/admin/v2/brokers/health"
HEALTH_REQUESTS = 500
CLUSTER = "standalone"

# Targets (per idle partition, or at the largest step of the full run).
WORKER_CPU_TARGET = 0.05  # core, at 100k idle partitions
REDIS_CPU_TARGET = 0.05  # core, at 100k idle partitions
WORKER_KIB_TARGET = 2.0  # KiB per idle partition
REDIS_BYTES_TARGET = 4096  # bytes per idle partition
HEALTH_P99_TARGET = 10.0  # ms
PER_THOUSAND_TARGET = 0.02  # core of Sluice + Redis per 1,000 idle partitions


# --- process figures -----------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a live process (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int) -> int:
    """Resident memory of a process, KiB (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except FileNotFoundError:
        pass
    return 0


def _command(pid: int) -> str:
    """A process's command line, words separated by spaces ("" once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _is_redis(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/comm") as handle:
            return handle.read().startswith("redis-server")
    except OSError:
        return False


def _is_worker(pid: int) -> bool:
    """Whether ``pid`` is a broker worker (``sluice worker``, not Celery's worker)."""
    command = _command(pid)
    return " worker " in command and "celery" not in command and not _is_redis(pid)


def descendants(root: int) -> list[int]:
    """``root`` and every live process below it."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo += children.get(pid, [])
    return tree


def redis_figures(clients: list[redis.Redis]) -> dict[str, float]:
    """Redis's own CPU seconds, commands processed, error replies, memory in use and keys,
    summed over ``clients`` (the masters of a cluster); and each node's commands and keys
    (``node <i> commands``, ``node <i> keys``)."""
    out: dict[str, float] = {}
    for index, client in enumerate(clients):
        info = client.info()
        errors = client.info("errorstats")
        keys = float(client.dbsize())
        figures = {
            "cpu": float(info["used_cpu_sys"]) + float(info["used_cpu_user"]),
            "commands": float(info["total_commands_processed"]),
            "errors": float(info.get("total_error_replies", 0)),
            "memory": float(info["used_memory"]),
            "keys": keys,
            f"node {index} commands": float(info["total_commands_processed"]),
            f"node {index} keys": keys,
            **{
                f"error {k.removeprefix('errorstat_')}": float(v["count"])
                for k, v in errors.items()
            },
        }
        for name, value in figures.items():
            out[name] = out.get(name, 0.0) + value
    return out


# --- the deployments -------------------------------------------------------------------------


class Deployment:
    """What a step measures: the admin URL, Redis, and the CPU of the Sluice processes."""

    admin_url: str
    redis_url: str
    worker_url: str  # the worker's HTTP endpoint (/metrics)
    label: str

    def sluice_cpu(self) -> dict[str, float]:
        """CPU seconds so far of each Sluice part (a key per part) and of all of them."""
        raise NotImplementedError

    def sluice_rss_kib(self) -> int:
        """Resident memory of the process holding the partitions (the worker), KiB."""
        raise NotImplementedError

    dormant: int | None = None  # the worker's dormant partitions, when it reports them

    def redis_clients(self) -> list[redis.Redis]:
        """Plain clients on every Redis server holding data (one, or each master)."""
        return [redis.Redis.from_url(self.redis_url)]

    def owned_partitions(self) -> tuple[int | None, int | None]:
        """Partitions the live workers say they own (the admin's list of workers), and the
        partitions the worker runs (``sluice_worker_owned_partitions`` on its /metrics);
        None for a figure nobody reports (a worker missing from the live list: its heartbeat
        expired)."""
        owned = running = None
        try:
            answer = httpx.get(f"{self.admin_url}/admin/v2/brokers/{CLUSTER}/workers", timeout=10)
            if answer.status_code == 200 and answer.json():
                owned = sum(int(w.get("ownedPartitions", 0)) for w in answer.json())
        except httpx.HTTPError:
            pass
        try:
            answer = httpx.get(f"{self.worker_url}/metrics", timeout=10)
            for line in answer.text.splitlines() if answer.status_code == 200 else []:
                if line.startswith("sluice_worker_owned_partitions"):
                    running = int(float(line.split()[-1]))
                if line.startswith("sluice_worker_dormant_partitions"):
                    self.dormant = int(float(line.split()[-1]))
        except httpx.HTTPError:
            pass
        return owned, running

    def close(self) -> None:
        """Stop everything the deployment started."""
        raise NotImplementedError


class SeparateDeployment(Deployment):
    """Redis, the admin service and one worker as separate processes (``bench.harness``)."""

    label = "Redis, admin service and one worker as separate processes (PostgreSQL)"

    def __init__(self, cluster: bool = False) -> None:
        self.stack = Stack(cluster=cluster).__enter__()
        if cluster:
            self.label = (
                "a 3-master Redis Cluster, admin service and one worker as separate "
                "processes (PostgreSQL)"
            )
        self.admin_url = self.stack.admin_url
        self.redis_url = self.stack.redis_url
        self.worker_url = f"http://127.0.0.1:{self.stack.worker_port}"
        self.admin_pid = self.stack.processes[0].pid
        self.worker_pid = self.stack.processes[-1].pid

    def sluice_cpu(self) -> dict[str, float]:
        worker, admin = cpu_seconds(self.worker_pid), cpu_seconds(self.admin_pid)
        return {"worker": worker, "admin": admin, "sluice": worker + admin}

    def sluice_rss_kib(self) -> int:
        return rss_kib(self.worker_pid)

    def redis_clients(self) -> list[redis.Redis]:
        server = self.stack.redis
        if isinstance(server, EmbeddedCluster):
            return [redis.Redis(port=node.port) for node in server.master_nodes()]
        return super().redis_clients()

    def close(self) -> None:
        self.stack.__exit__(None, None, None)


class StandaloneDeployment(Deployment):
    """The real ``sluice standalone``: SQLite and an embedded Redis in a folder of its own."""

    label = "sluice standalone (admin service, its worker child and its embedded Redis child)"

    def __init__(self, reports: bool = False) -> None:
        if reports:
            self.label = (
                "sluice standalone with its report scheduler (admin service, its worker, "
                "report scheduler and embedded Redis children)"
            )
        self.tmp = Path(tempfile.mkdtemp(prefix="sluice-bench-standalone-"))
        port, redis_port = free_port(), free_port()
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
        worker_port = free_port()
        env.update(PYTHONPATH=str(ROOT), SLUICE_WORKER_HTTP_PORT=str(worker_port))
        self.worker_url = f"http://127.0.0.1:{worker_port}"
        command = [sys.executable, "-m", "server.cli", "--log-level", "warning", "standalone"]
        command += ["--host", "127.0.0.1", "--port", str(port), "--redis-port", str(redis_port)]
        command += ["--data-dir", str(self.tmp / "data")]
        if not reports:
            command.append("--no-reports")
        self.log = open(self.tmp / "standalone.log", "w")  # noqa: SIM115
        self.process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT
        )
        self.admin_url = f"http://127.0.0.1:{port}"
        self.redis_url = f"redis://127.0.0.1:{redis_port}/0"
        try:
            wait_http(f"{self.admin_url}/admin/v2/brokers/ready", timeout=120)
        except RuntimeError:
            self.close()
            raise

    def sluice_cpu(self) -> dict[str, float]:
        root = self.process.pid
        tree = descendants(root)
        return {
            "process": cpu_seconds(root),
            "worker": sum(cpu_seconds(pid) for pid in tree if _is_worker(pid)),
            "tree": sum(cpu_seconds(pid) for pid in tree),
        }

    def sluice_rss_kib(self) -> int:
        """The memory of its worker child (the process holding the partitions)."""
        for pid in descendants(self.process.pid):
            if _is_worker(pid):
                return rss_kib(pid)
        return 0

    def close(self) -> None:
        stop_processes([self.process])
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


# --- creating the partitions -----------------------------------------------------------------


def namespaces() -> list[tuple[str, str]]:
    """(tenant, namespace) of every namespace the topics are spread over."""
    return [(f"idle{t}", f"ns{n}") for t in range(TENANTS) for n in range(NAMESPACES_PER_TENANT)]


def topic_path(index: int) -> str:
    """REST path of the ``index``-th topic (round-robin over the namespaces)."""
    tenant, namespace = namespaces()[index % len(namespaces())]
    return f"/admin/v2/persistent/{tenant}/{namespace}/quiet{index}"


def create_namespaces(admin_url: str) -> None:
    """The tenants and namespaces the topics go to."""
    with httpx.Client(base_url=admin_url, timeout=60) as http:
        for tenant in sorted({t for t, _ in namespaces()}):
            http.put(
                f"/admin/v2/tenants/{tenant}", json={"allowedClusters": [CLUSTER]}
            ).raise_for_status()
        for tenant, namespace in namespaces():
            http.put(f"/admin/v2/namespaces/{tenant}/{namespace}").raise_for_status()


def create_topics(admin_url: str, indexes: range, concurrency: int) -> int:
    """Create topics ``indexes`` with their subscription, ``concurrency`` callers at a time;
    the number of REST calls made."""
    local = threading.local()

    def one(index: int) -> None:
        if not hasattr(local, "http"):
            local.http = httpx.Client(base_url=admin_url, timeout=300)
        path = topic_path(index)
        for method, url, body in (
            ("PUT", f"{path}/partitions", str(PARTITIONS_PER_TOPIC)),
            ("PUT", f"{path}/subscription/{SUBSCRIPTION}", None),
        ):
            headers = {"Content-Type": "application/json"} if body else None
            answer = local.http.request(method, url, content=body, headers=headers)
            if answer.status_code >= 300:
                raise RuntimeError(f"{method} {url}: {answer.status_code} {answer.text}")

    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, indexes))
    return 2 * len(indexes)


def consumer_partitions(indexes: range, share: float, room: int) -> list[str]:
    """Full names of the partitions of topics ``indexes`` that get a consumer: every
    (1/share)-th partition, at most ``room`` of them."""
    every = max(1, round(1 / share)) if share > 0 else 0
    names: list[str] = []
    if not every:
        return names
    for index in indexes:
        tenant_ns_topic = topic_path(index).removeprefix("/admin/v2/persistent/")
        for partition in range(0, PARTITIONS_PER_TOPIC, every):
            if len(names) >= room:
                return names
            names.append(f"persistent://{tenant_ns_topic}-partition-{partition}")
    return names


# --- one step --------------------------------------------------------------------------------


@dataclass
class Step:
    """The figures of one step."""

    partitions: int
    topics: int
    consumers: int
    create_seconds: float = 0.0
    calls: int = 0
    owned: tuple[int | None, int | None] = (None, None)  # when settled
    owned_after: tuple[int | None, int | None] = (None, None)  # after the windows
    wait_seconds: float = 0.0
    quiet: dict[str, float] = field(default_factory=dict)  # cores, per part
    probed: dict[str, float] = field(default_factory=dict)  # cores, per part
    commands_per_s: float = 0.0
    errors_per_s: float = 0.0
    error_kinds: dict[str, float] = field(default_factory=dict)  # per second, by prefix
    redis_keys: float = 0.0
    sluice_rss_kib: int = 0
    redis_memory: float = 0.0
    health: list[float] = field(default_factory=list)
    node_commands: list[float] = field(default_factory=list)  # per Redis master, per second
    node_keys: list[float] = field(default_factory=list)  # per Redis master


def wait_owned(
    deployment: Deployment, expected: int, stable: float, limit: float
) -> tuple[int | None, int | None]:
    """Wait until the workers report owning and running ``expected`` partitions, or their
    counts have not changed for ``stable`` seconds (a worker that runs only the partitions
    that are not dormant), at most ``limit`` seconds; the counts last reported."""
    started = time.monotonic()
    last, since = deployment.owned_partitions(), time.monotonic()
    while time.monotonic() - started < limit:
        # Owned, and (a worker that reports it) gone dormant: the quiet steady state.
        asleep = deployment.dormant is None or deployment.dormant >= expected
        if asleep and all(count is not None and count >= expected for count in last):
            return last
        time.sleep(1.0)
        dormant = deployment.dormant
        now = deployment.owned_partitions()
        if now != last or deployment.dormant != dormant:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= stable:
            return last
    return last


def window(
    deployment: Deployment,
    plain: list[redis.Redis],
    seconds: float,
    during: Callable[[], object],
) -> tuple[dict[str, float], dict[str, float]]:
    """Cores used by each part while ``during()`` runs (it lasts about ``seconds``); and the
    Redis figures' deltas per second."""
    sluice_before, redis_before = deployment.sluice_cpu(), redis_figures(plain)
    started = time.monotonic()
    during()
    elapsed = time.monotonic() - started
    sluice_after, redis_after = deployment.sluice_cpu(), redis_figures(plain)
    cores = {k: (sluice_after[k] - sluice_before[k]) / elapsed for k in sluice_before}
    cores["redis"] = (redis_after["cpu"] - redis_before["cpu"]) / elapsed
    rates = {
        "commands": (redis_after["commands"] - redis_before["commands"]) / elapsed,
        "errors": (redis_after["errors"] - redis_before["errors"]) / elapsed,
        **{
            kind: (count - redis_before.get(kind, 0.0)) / elapsed
            for kind, count in redis_after.items()
            if kind.startswith("error ") and count > redis_before.get(kind, 0.0)
        },
        **{
            kind: (count - redis_before.get(kind, 0.0)) / elapsed
            for kind, count in redis_after.items()
            if kind.startswith("node ") and kind.endswith(" commands")
        },
        **{kind: count for kind, count in redis_after.items() if kind.endswith(" keys")},
        "memory": redis_after["memory"],
        "keys": redis_after["keys"],
    }
    return cores, rates


def measure_step(
    deployment: Deployment, step: Step, settle: float, seconds: float, max_wait: float
) -> None:
    """Wait for the step to settle, then the quiet and the probed windows."""
    started = time.monotonic()
    step.owned = wait_owned(deployment, step.partitions, stable=15.0, limit=max_wait)
    time.sleep(settle)
    step.wait_seconds = time.monotonic() - started
    plain = deployment.redis_clients()
    step.quiet, rates = window(deployment, plain, seconds, lambda: time.sleep(seconds))
    step.node_commands = [
        v for k, v in sorted(rates.items()) if k.startswith("node ") and k.endswith(" commands")
    ]
    step.node_keys = [
        v for k, v in sorted(rates.items()) if k.startswith("node ") and k.endswith(" keys")
    ]
    step.commands_per_s = rates["commands"]
    step.errors_per_s = rates["errors"]
    step.error_kinds = {
        k.removeprefix("error "): v for k, v in rates.items() if k.startswith("error ")
    }
    step.redis_memory = rates["memory"]
    step.redis_keys = rates["keys"]
    step.sluice_rss_kib = deployment.sluice_rss_kib()
    request = prepare(deployment.admin_url, "GET", HEALTH)
    rate = HEALTH_REQUESTS / seconds

    def probe() -> None:
        step.health = asyncio.run(open_loop(deployment.admin_url, request, rate, seconds))

    step.probed, _ = window(deployment, plain, seconds, probe)
    step.owned_after = deployment.owned_partitions()
    for client in plain:
        client.close()


# --- the table -------------------------------------------------------------------------------


def total(cores: dict[str, float], standalone: bool) -> float:
    """Sluice + Redis, cores (the standalone's tree holds its Redis)."""
    return cores["tree"] if standalone else cores["sluice"] + cores["redis"]


def per_master(values: list[float], least_total: float) -> str:
    """A figure of each Redis master, and the largest one's share of their total (the total
    taken as at least ``least_total``)."""
    shares = max(values) / max(sum(values), least_total)
    return " / ".join(f"{v:,.0f}" for v in values) + f" ({shares:.0%})"


def table(steps: list[Step], standalone: bool, full: bool) -> list[dict]:
    """One row per measure, one column per step, the target beside them."""
    base = steps[0]
    columns = [f"{s.partitions:,}" for s in steps]
    largest = steps[-1]
    rows: list[dict] = []

    def row(measure: str, target: str, values: list[str], verdict: str = "") -> None:
        rows.append(
            {
                "measure": measure,
                "target": target,
                **dict(zip(columns, values, strict=True)),
                "at largest step": verdict or "-",
            }
        )

    def per_thousand(step: Step, cores: float) -> float | None:
        return cores / (step.partitions / 1000) if step.partitions else None

    def increment(step: Step, now: float, then: float, unit: float) -> float | None:
        return (now - then) / (step.partitions / unit) if step.partitions else None

    def show(value: float | None, digits: int = 3) -> str:
        return "-" if value is None else f"{value:,.{digits}f}"

    def met(ok: bool) -> str:
        return "met" if ok else "NOT met"

    def per_thousand_row(measure: str, cores: list[float | None]) -> None:
        """Cores per 1,000 idle partitions, against the target at the largest step."""
        last = cores[-1]
        verdict = met(last is not None and last < PER_THOUSAND_TARGET)
        row(measure, f"< {PER_THOUSAND_TARGET}", [show(v, 4) for v in cores], verdict)

    row(
        "topics of 100 partitions / connected consumers",
        "",
        [f"{s.topics:,} / {s.consumers:,}" for s in steps],
    )
    row(
        "creation of the step: s (REST calls)",
        "",
        [f"{s.create_seconds:.1f} ({s.calls:,})" if s.calls else "-" for s in steps],
    )

    def counts(pair: tuple[int | None, int | None]) -> str:
        return " / ".join("?" if c is None else f"{c:,}" for c in pair)

    row(
        "partitions owned (admin's workers list) / run (worker /metrics): settled; after",
        "",
        [f"{counts(s.owned)}; {counts(s.owned_after)}" for s in steps],
    )
    row("s from the step's creation until settled", "", [f"{s.wait_seconds:.0f}" for s in steps])
    if standalone:
        row(
            "admin service (the standalone process) CPU, core",
            "",
            [show(s.quiet["process"]) for s in steps],
        )
        row("worker child CPU, core", "", [show(s.quiet["worker"]) for s in steps])
    else:
        row(
            "worker CPU, core",
            f"< {WORKER_CPU_TARGET} at 100k",
            [show(s.quiet["worker"]) for s in steps],
            met(largest.quiet["worker"] < WORKER_CPU_TARGET) if full else "",
        )
        row("admin service CPU, core", "", [show(s.quiet["admin"]) for s in steps])
    row(
        "Redis CPU, core (INFO cpu)",
        f"< {REDIS_CPU_TARGET} at 100k",
        [show(s.quiet["redis"]) for s in steps],
        met(largest.quiet["redis"] < REDIS_CPU_TARGET) if full else "",
    )
    quiet = [total(s.quiet, standalone) for s in steps]
    row("Sluice + Redis CPU, core", "", [show(v) for v in quiet])
    thousands = [per_thousand(s, q) for s, q in zip(steps, quiet, strict=True)]
    per_thousand_row("Sluice + Redis per 1,000 idle partitions, core", thousands)
    over = [increment(s, q, quiet[0], 1000) for s, q in zip(steps, quiet, strict=True)]
    per_thousand_row("  the same, increment over the 0 step, core", over)
    probed = [total(s.probed, standalone) for s in steps]
    row(
        f"Sluice + Redis CPU while probing health ({HEALTH_REQUESTS} requests), core",
        "",
        [show(v) for v in probed],
    )
    probed_thousands = [per_thousand(s, p) for s, p in zip(steps, probed, strict=True)]
    per_thousand_row("  the same per 1,000 idle partitions, core", probed_thousands)
    who = "worker"
    row(f"{who} RSS, MiB", "", [f"{s.sluice_rss_kib / 1024:,.1f}" for s in steps])
    kib = [increment(s, s.sluice_rss_kib, base.sluice_rss_kib, 1) for s in steps]
    row(
        f"{who} RSS per idle partition over the 0 step, KiB",
        f"< {WORKER_KIB_TARGET:g}",
        [show(v, 2) for v in kib],
        met(kib[-1] is not None and kib[-1] < WORKER_KIB_TARGET),
    )
    row("Redis used_memory, MiB", "", [f"{s.redis_memory / 2**20:,.1f}" for s in steps])
    per_bytes = [increment(s, s.redis_memory, base.redis_memory, 1) for s in steps]
    row(
        "Redis memory per idle partition over the 0 step, bytes",
        f"< {REDIS_BYTES_TARGET:,}",
        [show(v, 0) for v in per_bytes],
        met(per_bytes[-1] is not None and per_bytes[-1] < REDIS_BYTES_TARGET),
    )
    row(
        "Redis commands/s (x the 0 step)",
        "",
        [
            f"{s.commands_per_s:,.0f} (x{s.commands_per_s / max(base.commands_per_s, 1e-9):,.1f})"
            for s in steps
        ],
    )

    def kinds(step: Step) -> str:
        ranked = sorted(step.error_kinds.items(), key=lambda kv: -kv[1])[:2]
        return "".join(f", {kind} {rate:,.1f}" for kind, rate in ranked)

    row(
        "Redis error replies/s (the most frequent kinds)",
        "",
        [f"{s.errors_per_s:,.1f}{kinds(s)}" for s in steps],
    )
    row(
        "Redis keys (per idle partition over the 0 step)",
        "",
        [
            f"{s.redis_keys:,.0f}"
            + (f" ({(s.redis_keys - base.redis_keys) / s.partitions:.1f})" if s.partitions else "")
            for s in steps
        ],
    )
    if len(largest.node_keys) > 1:
        row(
            "keys per Redis master (largest share of all)",
            "spread",
            [per_master(s.node_keys, 1) for s in steps],
        )
        row(
            "commands/s per Redis master (largest share of all)",
            "no hot node",
            [per_master(s.node_commands, 1e-9) for s in steps],
        )
    p99 = [percentile(s.health, 0.99) for s in steps]
    row(
        "admin health p50 / p99 / max, ms",
        f"p99 < {HEALTH_P99_TARGET:g}",
        [
            f"{percentile(s.health, 0.5):.1f} / {p:.1f} / {max(s.health):.1f}"
            for s, p in zip(steps, p99, strict=True)
        ],
        met(p99[-1] < HEALTH_P99_TARGET),
    )
    row("  p99 / the 0 step's p99", "", [f"{p / p99[0]:.2f}" for p in p99])
    return rows


# --- main ------------------------------------------------------------------------------------


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="0, 1k, 5k partitions, 10 s windows")
    parser.add_argument("--standalone", action="store_true", help="measure `sluice standalone`")
    parser.add_argument(
        "--reports",
        action="store_true",
        help="with --standalone: keep its report scheduler (as a user runs it)",
    )
    parser.add_argument(
        "--cluster", action="store_true", help="on a 3-master Redis Cluster (separate processes)"
    )
    parser.add_argument("--steps", help="comma-separated idle partition counts (from 0)")
    parser.add_argument("--window", type=float, help="seconds per measuring window")
    parser.add_argument("--settle", type=float, help="seconds to wait once the worker owns all")
    parser.add_argument(
        "--max-wait",
        type=float,
        help="seconds to wait at most for the workers' counts (quick 30, else 60 + N/200)",
    )
    parser.add_argument("--consumer-share", type=float, default=0.1, help="default 0.1")
    parser.add_argument("--max-consumers", type=int, default=1000, help="default 1000")
    parser.add_argument("--concurrency", type=int, default=4, help="REST callers creating")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    return parser.parse_args()


def main() -> None:
    args = parse_arguments()
    if args.steps:
        sizes = [int(s) for s in args.steps.split(",")]
    elif args.quick or args.standalone:
        sizes = [0, 1000, 5000]
    else:
        sizes = [0, 1000, 10_000, 100_000]
    if sizes[0] != 0 or any(s % PARTITIONS_PER_TOPIC for s in sizes) or sizes != sorted(sizes):
        raise SystemExit(f"steps must start at 0, grow, and be multiples of {PARTITIONS_PER_TOPIC}")
    seconds = args.window or (10.0 if args.quick else 20.0)
    # Past the worker's 7 s of quiet before a partition goes dormant, even in quick mode.
    settle = args.settle if args.settle is not None else (10.0 if args.quick else 20.0)
    load_before = os.getloadavg()
    deployment: Deployment = (
        StandaloneDeployment(args.reports)
        if args.standalone
        else SeparateDeployment(cluster=args.cluster)
    )
    host: ConsumerPool | None = None
    steps: list[Step] = []
    try:
        create_namespaces(deployment.admin_url)
        host = ConsumerPool(deployment.redis_url)
        topics = 0
        for size in sizes:
            wanted = size // PARTITIONS_PER_TOPIC
            new = range(topics, wanted)
            step = Step(size, wanted, 0)
            started = time.monotonic()
            step.calls = create_topics(deployment.admin_url, new, args.concurrency)
            step.create_seconds = time.monotonic() - started
            topics = wanted
            room = args.max_consumers - host.count
            chosen = consumer_partitions(new, args.consumer_share, room)
            step.consumers = host.add([(name, SUBSCRIPTION) for name in chosen])
            print(
                f"step {size:,}: created {len(new)} topics in {step.create_seconds:.1f} s, "
                f"{step.consumers} consumers",
                file=sys.stderr,
                flush=True,
            )
            max_wait = args.max_wait
            if max_wait is None:
                max_wait = (60.0 if args.quick else 120.0) + size / 100
            measure_step(deployment, step, settle, seconds, max_wait)
            steps.append(step)
    finally:
        if host is not None:
            host.close()
        deployment.close()
    load_after = os.getloadavg()
    rows = table(steps, args.standalone, full=not args.quick and sizes[-1] >= 100_000)
    report(f"Idle partitions: {deployment.label}", rows, args.json)
    cap = args.max_consumers
    print(
        f"\nConsumers: one Shared consumer (not receiving) on every "
        f"{round(1 / args.consumer_share) if args.consumer_share else 0}th partition, at most "
        f"{cap:,} in all (so under {args.consumer_share:.0%} of the partitions past "
        f"{int(cap / args.consumer_share) if args.consumer_share else 0:,}); each heartbeats "
        "at the client's default interval (one Redis call each), part of the Redis "
        "commands/s and CPU above.  "
        f"Windows: {seconds:.0f} s quiet, then {seconds:.0f} s with {HEALTH_REQUESTS} health "
        f"requests; settle {settle:.0f} s after the workers' counts reached the step (or "
        "stopped changing for 15 s, or the wait ran out).  Load average "
        f"(1/5/15 min) before: {' '.join(f'{v:.2f}' for v in load_before)}, after: "
        f"{' '.join(f'{v:.2f}' for v in load_after)} (the machine is shared)."
    )


if __name__ == "__main__":
    main()
