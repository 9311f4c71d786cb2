"""The standalone's admin API under a loaded worker: health latency while dispatch runs flat out.

Starts the real ``sluice standalone`` (free ports, ``--no-reports``, SQLite and the embedded
Redis in a temporary folder) and measures ``GET /admin/v2/brokers/health`` at a fixed rate
(``RATE`` requests/s, open loop: latency counts from when a request was due):

* idle: no topic, no load (the baseline);
* dispatch: a producer process and a consumer process on a Shared subscription move 256-byte
  messages through the worker as fast as they can, unthrottled (the producer keeps at most
  ``MAX_AHEAD`` messages ahead of the consumer); the achieved msg/s is what the consumer
  received and acknowledged during the measurement;
* idle partitions: 1,000 partitions (250 with ``--quick``) with a subscription each, owned by
  the worker, no traffic; then the same with the dispatch load on top.

Target: health p99 under 10 ms in every phase, at 50,000 msg/s of dispatch (on 2 shared
cores the pair reaches less: the figure is printed).  Also printed: the CPU each process used
per second of the phase (the standalone's admin service, its worker, Redis).

    python -m bench.admin_under_load [--quick]
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

import sluice
from bench.dispatch_throughput import fill_topic
from bench.harness import ROOT, arguments, percentile, report
from bench.httpload import open_loop, prepare
from tests.receiving import receive_until
from tests.standalone_process import Standalone as StandaloneProcess

RATE = 100.0  # health requests/s (as bench.partition_churn)
TOPIC = "persistent://bench/ns/flow"
IDLE_TOPIC = "/admin/v2/persistent/bench/ns/idle"
PRODUCE_CALL = 5_000  # messages per producer step (calls of 500)
MAX_AHEAD = 200_000  # messages the producer may be ahead of the consumer
ADMIN = "/admin/v2"


class Standalone(StandaloneProcess):
    """``sluice standalone`` as a user starts it, on free ports, in a temporary folder."""

    def __init__(self) -> None:
        super().__init__(
            Path(tempfile.mkdtemp(prefix="sluice-bench-standalone-")),
            "--log-level",
            "warning",
            "--no-reports",
            env={"PYTHONPATH": str(ROOT)},
        )

    def __enter__(self) -> Standalone:
        try:
            self.start()
        except BaseException:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
        if exc and exc[0] is not None:
            print((self.folder / "standalone.log").read_text()[-3000:], file=sys.stderr)
        shutil.rmtree(self.folder, ignore_errors=True)

    def pids(self) -> dict[str, int]:
        """The processes to account CPU to: the admin service (the standalone itself), the
        worker and Redis (from the standalone's pid files)."""
        assert self.process is not None
        pids = {"admin": self.process.pid}
        for name, label in (("worker", "worker"), ("redis-server", "redis")):
            pid_file = self.folder / "data" / "run" / f"{name}.pid"
            if pid_file.exists():  # (a worker in the admin service's process has none)
                pids[label] = int(pid_file.read_text())
        return pids

    def owned_partitions(self) -> int:
        """Partitions the live workers own."""
        workers = httpx.get(f"{self.url}{ADMIN}/brokers/standalone/workers", timeout=10).json()
        return sum(w["ownedPartitions"] for w in workers)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def produce(url: str, received, stop) -> None:
    """Producer process: produce as fast as possible, at most ``MAX_AHEAD`` ahead."""
    produced = 0
    with sluice.Client(url) as client:
        while not stop.is_set():
            if produced - received.value > MAX_AHEAD:
                time.sleep(0.005)
                continue
            fill_topic(client, PRODUCE_CALL, TOPIC)
            produced += PRODUCE_CALL


def consume(url: str, received, ready, stop) -> None:
    """Consumer process: receive and acknowledge on a Shared subscription, counting."""
    count = 0
    with sluice.Client(url) as client:
        consumer = client.subscribe(TOPIC, "bench", consumer_type=sluice.ConsumerType.Shared)

        def acknowledge(message: sluice.Message) -> None:
            nonlocal count
            consumer.acknowledge(message)
            count += 1
            if count % 1000 == 0:
                received.value = count

        ready.set()
        receive_until(stop, consumer, acknowledge, timeout_millis=200)
        consumer.close()


class Dispatch:
    """The producer and consumer processes, while the ``with`` block runs."""

    def __init__(self, url: str) -> None:
        context = mp.get_context("spawn")
        self.received = context.Value("q", 0, lock=False)
        self.stop, self.ready = context.Event(), context.Event()
        self.processes = [
            context.Process(target=consume, args=(url, self.received, self.ready, self.stop)),
            context.Process(target=produce, args=(url, self.received, self.stop)),
        ]

    def __enter__(self) -> Dispatch:
        try:
            self.processes[0].start()
            if not self.ready.wait(60):
                raise RuntimeError("the consumer did not subscribe")
            self.processes[1].start()
            # Until messages flow at a steady rate.
            deadline = time.monotonic() + 120
            while self.received.value < 10_000:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.received.value} messages dispatched in 120 s")
                time.sleep(0.1)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for process in self.processes:
            if process.pid is None:
                continue
            process.join(30)
            if process.exitcode is None:
                process.kill()


def measure(server: Standalone, seconds: float, dispatch: Dispatch | None) -> dict:
    """Health latencies over ``seconds``, the dispatch rate and each process's CPU use."""
    request = prepare(server.url, "GET", f"{ADMIN}/brokers/health")
    pids = server.pids()
    cpu_before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    received_before = dispatch.received.value if dispatch else 0
    started = time.perf_counter()
    latencies = asyncio.run(open_loop(server.url, request, RATE, seconds))
    elapsed = time.perf_counter() - started
    received = (dispatch.received.value - received_before) if dispatch else 0
    cpu = {name: (cpu_seconds(pid) - cpu_before[name]) / elapsed for name, pid in pids.items()}
    return {"latencies": latencies, "msg/s": received / elapsed, "cpu": cpu}


def progress(began: float, what: str) -> None:
    """A line on stderr: how far the run is."""
    print(f"[{time.monotonic() - began:5.1f} s] {what}", file=sys.stderr, flush=True)


def main() -> None:
    args = arguments(__doc__.split("\n")[0])
    seconds = 5.0 if args.quick else 20.0
    # Idle partitions are not free for the worker: about 0.6 ms of CPU each per second were
    # measured on the loaded 2-core machine, so 2,000 of them starved it of its lease renewals.
    partitions = 250 if args.quick else 1_000
    per_topic = 250
    load = os.getloadavg()[0]
    began = time.monotonic()
    runs: list[tuple[str, dict]] = []
    with Standalone() as server, httpx.Client(base_url=server.url, timeout=120) as http:
        progress(began, "standalone ready")
        http.put(f"{ADMIN}/tenants/bench", json={"allowedClusters": ["standalone"]})
        http.put(f"{ADMIN}/namespaces/bench/ns").raise_for_status()
        http.put(f"{ADMIN}/persistent/bench/ns/flow").raise_for_status()
        asyncio.run(  # warm up
            open_loop(server.url, prepare(server.url, "GET", f"{ADMIN}/brokers/health"), RATE, 1)
        )
        runs.append(("idle (baseline)", measure(server, seconds, None)))
        progress(began, "baseline measured")
        with Dispatch(server.redis_url) as dispatch:
            progress(began, "dispatch flowing")
            runs.append(("unthrottled dispatch", measure(server, seconds, dispatch)))
        progress(began, "dispatch measured")
        for n in range(partitions // per_topic):
            topic = f"{IDLE_TOPIC}{n}"
            http.put(f"{topic}/partitions", json=per_topic).raise_for_status()
            http.put(f"{topic}/subscription/s").raise_for_status()
        deadline = time.monotonic() + 300
        while server.owned_partitions() < partitions + 1:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the worker owns {server.owned_partitions()} partitions")
            time.sleep(0.5)
        time.sleep(1.0)  # the claims settle
        progress(began, f"{partitions:,} partitions owned by the worker")
        runs.append((f"{partitions:,} idle partitions", measure(server, seconds, None)))
        with Dispatch(server.redis_url) as dispatch:
            progress(began, "dispatch flowing")
            runs.append(
                (
                    f"{partitions:,} idle partitions + unthrottled dispatch",
                    measure(server, seconds, dispatch),
                )
            )
    baseline = percentile(runs[0][1]["latencies"], 0.99)
    rows = []
    for label, run in runs:
        latencies = run["latencies"]
        rows.append(
            {
                "phase": label,
                "health requests": len(latencies),
                "p50 ms": percentile(latencies, 0.50),
                "p99 ms": percentile(latencies, 0.99),
                "max ms": max(latencies),
                "p99 / baseline p99": percentile(latencies, 0.99) / baseline,
                "dispatch msg/s": run["msg/s"],
                "CPU admin / worker / redis": " / ".join(
                    f"{run['cpu'][name]:.2f}" if name in run["cpu"] else "-"
                    for name in ("admin", "worker", "redis")
                ),
            }
        )
    report(
        f"sluice standalone: admin health at {RATE:.0f} req/s while its worker dispatches "
        f"(SQLite, embedded Redis; load average {load:.1f} at the start)",
        rows,
        args.json,
    )


if __name__ == "__main__":
    main()
