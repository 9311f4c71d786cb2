"""Sluice on one Redis server vs a 3-master Redis Cluster: throughput, accuracy, shard load.

    python -m bench.cluster_scaling            # 200,000 messages, 10 s of throttled traffic
    python -m bench.cluster_scaling --quick    # 10,000 messages, 2 s (CI smoke run)

For each topology the same deployment runs as real processes: ``sluice api`` on a SQLite file,
two ``sluice worker`` processes, a producer process and two consumer processes (Shared
subscription, receive + acknowledge), every one given only ``REDIS_URL``.  The topic has 6
partitions, so on the cluster they spread over the three shards.

1. Unthrottled dispatch: the producer sends N messages as fast as it can while the consumers
   receive and acknowledge them; the rate is N over the time until the last one is
   acknowledged (produce -> worker -> consume + ack), with the cluster's ratio to the single
   server.  Next to it, the CPU seconds each Redis server used (``INFO cpu``), which shows
   whether the load splits over the shards.
2. Throttled accuracy on the cluster: a namespace rate of LIMIT msg/s per partition over a
   backlog; the strict bound (by T seconds after the subscription exists at most
   LIMIT x (floor(T) + 1) messages of a partition) is checked for every partition, and the
   share of that bound reached at the end is printed (1.0 = every period used in full).

On a 2-core machine every process (Redis servers included) shares the same two cores, so the
cluster cannot be faster there: the per-shard CPU is what shows the work really spreading.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench.harness import arguments, report, stop_processes, wait_http
from migrations import upgrade
from server.embedded_cluster import EmbeddedCluster
from server.embedded_redis import EmbeddedRedis, free_port
from sluice.protocol.connection import connect

ROOT = Path(__file__).resolve().parents[1]
PARTITIONS = 6
WORKERS = 2
CONSUMERS = 2
TOPIC = "persistent://bench/ns/scaling"
THROTTLED = "persistent://bench/ns/throttled"


class Deployment:
    """Redis (one server or a cluster), ``sluice api`` on SQLite and the workers."""

    def __init__(self, cluster: bool) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="sluice-cluster-bench-"))
        self.cluster = cluster
        self.redis = (
            EmbeddedCluster(self.tmp / "cluster", masters=3)
            if cluster
            else EmbeddedRedis(self.tmp / "redis")
        )
        self.port = free_port()
        self.processes: list[subprocess.Popen] = []

    @property
    def redis_url(self) -> str:
        return self.redis.url

    def env(self, **extra: str) -> dict[str, str]:
        return {
            **os.environ,
            "DATABASE_URL": f"sqlite:///{self.tmp / 'sluice.db'}",
            "REDIS_URL": self.redis_url,
            "SLUICE_DATA_DIR": str(self.tmp / "data"),
            "PYTHONPATH": str(ROOT),
            **extra,
        }

    def __enter__(self) -> Deployment:
        self.redis.start()
        upgrade(self.env()["DATABASE_URL"])
        self._spawn("api", "--host", "127.0.0.1", "--port", str(self.port))
        wait_http(f"http://127.0.0.1:{self.port}/admin/v2/brokers/ready")
        ports = [free_port() for _ in range(WORKERS)]
        for number, port in enumerate(ports):
            self._spawn(
                "worker",
                env={"SLUICE_WORKER_HTTP_PORT": str(port), "SLUICE_WORKER_ID": f"w{number}"},
            )
        for port in ports:
            wait_http(f"http://127.0.0.1:{port}/readyz")
        with self.admin() as http:
            http.put("/admin/v2/tenants/bench", json={"allowedClusters": ["standalone"]})
            http.put("/admin/v2/namespaces/bench/ns")
        return self

    def _spawn(self, *args: str, env: dict[str, str] | None = None) -> None:
        log = open(self.tmp / f"{args[0]}-{len(self.processes)}.log", "w")  # noqa: SIM115
        self.processes.append(
            subprocess.Popen(
                [sys.executable, "-m", "server.cli", "--log-level", "warning", *args],
                cwd=ROOT,
                env=self.env(**(env or {})),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )

    def admin(self) -> httpx.Client:
        return httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=30)

    def topic(self, topic: str) -> None:
        """Create a partitioned topic with the subscription, and wait until it is owned."""
        path = "/admin/v2/persistent/" + topic.removeprefix("persistent://")
        with self.admin() as http:
            assert http.put(f"{path}/partitions", json=PARTITIONS).status_code == 204
            assert http.put(f"{path}/subscription/bench").status_code == 204
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                answer = http.get(f"{path}/lookup")
                if answer.status_code == 200 and all(
                    a.get("owner") for a in answer.json().values()
                ):
                    return
                time.sleep(0.2)
        raise RuntimeError(f"{topic} not owned")

    def cpu(self) -> dict[str, float]:
        """CPU seconds used so far by each Redis server (master)."""
        if isinstance(self.redis, EmbeddedCluster):
            return {f"shard :{p}": s for p, s in sorted(self.redis.cpu_seconds().items())}
        plain = connect(self.redis_url)
        try:
            info = plain.info("cpu")
        finally:
            plain.close()
        return {"server": float(info["used_cpu_user"]) + float(info["used_cpu_sys"])}

    def __exit__(self, *exc: object) -> None:
        stop_processes(self.processes)
        self.redis.stop()


def produce(url: str, topic: str, count: int, ready, go) -> None:
    """A producer process: once ``go`` is set, send ``count`` messages as fast as batching
    allows."""
    import sluice

    with sluice.Client(url) as client:
        producer = client.create_producer(topic, batching_enabled=True, block_if_queue_full=True)
        ready.release()
        go.wait()
        for number in range(count):
            producer.send_async(b"x" * 200, None)
            if number % 1000 == 999:
                producer.flush()
        producer.flush()


def consume(url: str, topic: str, done, total: int, deadline: float, ready) -> None:
    """A consumer process: receive and acknowledge until ``total`` arrived in all."""
    import sluice

    with sluice.Client(url) as client:
        consumer = client.subscribe(
            topic, "bench", consumer_type=sluice.ConsumerType.Shared, receiver_queue_size=1000
        )
        ready.release()
        while time.time() < deadline:
            with done.get_lock():
                if done.value >= total:
                    return
            try:
                message = consumer.receive(timeout_millis=200)
            except sluice.Timeout:
                continue
            consumer.acknowledge(message)
            with done.get_lock():
                done.value += 1


def unthrottled(deployment: Deployment, count: int) -> tuple[float, dict[str, float]]:
    """Messages per second end to end, and each server's CPU seconds during the run."""
    deployment.topic(TOPIC)
    spawn = multiprocessing.get_context("spawn")
    done = spawn.Value("l", 0)
    ready, go = spawn.Semaphore(0), spawn.Event()
    deadline = time.time() + 600
    url = deployment.redis_url
    consumers = [
        spawn.Process(target=consume, args=(url, TOPIC, done, count, deadline, ready))
        for _ in range(CONSUMERS)
    ]
    producer = spawn.Process(target=produce, args=(url, TOPIC, count, ready, go))
    for process in [*consumers, producer]:
        process.start()
    for _ in range(CONSUMERS + 1):  # every process connected and subscribed
        ready.acquire()
    before = deployment.cpu()
    started = time.monotonic()
    go.set()
    producer.join()
    for process in consumers:
        process.join()
    elapsed = time.monotonic() - started
    if done.value < count:
        raise RuntimeError(f"only {done.value} of {count} messages arrived")
    after = deployment.cpu()
    return count / elapsed, {k: after[k] - before.get(k, 0.0) for k in after}


def throttled(deployment: Deployment, limit: int, seconds: float) -> list[dict]:
    """Per partition: the worst excess over the strict bound and the share of the limit used."""
    import sluice

    deployment.topic(THROTTLED)
    with deployment.admin() as http:
        body = {
            "dispatchThrottlingRateInMsg": limit,
            "dispatchThrottlingRateInByte": -1,
            "ratePeriodInSecond": 1,
            "relativeToPublishRate": False,
        }
        assert http.post("/admin/v2/namespaces/bench/ns/dispatchRate", json=body).status_code == 204
    backlog = int(limit * (seconds + 3))
    with sluice.Client(deployment.redis_url) as client:
        producer = client.create_producer(
            THROTTLED, batching_enabled=False, block_if_queue_full=True
        )
        for _ in range(backlog * PARTITIONS):
            producer.send_async(b"x" * 200, None)
        producer.flush()
        origin = time.monotonic()  # no later than the subscription's first dispatch
        consumer = client.subscribe(
            THROTTLED, "bench", consumer_type=sluice.ConsumerType.Shared, receiver_queue_size=1000
        )
        arrivals: dict[int, list[float]] = {i: [] for i in range(PARTITIONS)}
        while time.monotonic() - origin < seconds - 0.05:
            try:
                message = consumer.receive(timeout_millis=100)
            except sluice.Timeout:
                continue
            arrivals[message.message_id().partition()].append(time.monotonic() - origin)
            consumer.acknowledge(message)
    rows = []
    for index, times in arrivals.items():
        ordered = sorted(times)
        worst = max(
            (n - limit * (math.floor(at) + 1) for n, at in enumerate(ordered, 1)), default=0
        )
        # Arrivals by T = seconds - 0.05 may reach LIMIT x seconds (the strict bound).
        used = sum(1 for at in times if at < seconds) / (limit * seconds)
        rows.append(
            {
                "partition": index,
                "limit msg/s": limit,
                "received": len(times),
                "worst excess over bound": max(worst, 0),
                "share of the bound reached": used,
            }
        )
    return rows


def main() -> None:
    args = arguments(__doc__.split("\n")[0])
    count = 10_000 if args.quick else 200_000
    seconds = 2.0 if args.quick else 10.0
    limit = 50 if args.quick else 200
    results = {}
    cpu_rows = []
    accuracy: list[dict] = []
    for name, cluster in (("1 server", False), ("3-master cluster", True)):
        with Deployment(cluster) as deployment:
            rate, cpu = unthrottled(deployment, count)
            results[name] = rate
            total = sum(cpu.values())
            for server, used in cpu.items():
                cpu_rows.append(
                    {
                        "topology": name,
                        "Redis server": server,
                        "CPU s": used,
                        "share of Redis CPU": used / total if total else 0.0,
                    }
                )
            if cluster:
                accuracy = throttled(deployment, limit, seconds)
    base = results["1 server"]
    report(
        f"Unthrottled dispatch, {count:,} messages, {PARTITIONS} partitions, "
        f"{WORKERS} workers, {CONSUMERS} consumers",
        [
            {"topology": name, "msg/s end to end": rate, "ratio to 1 server": rate / base}
            for name, rate in results.items()
        ],
        args.json,
    )
    report("Redis server CPU during the unthrottled run (INFO cpu)", cpu_rows)
    report(
        f"Throttled accuracy on the cluster: {limit} msg/s per partition, {seconds:.0f} s",
        accuracy,
    )


if __name__ == "__main__":
    main()
