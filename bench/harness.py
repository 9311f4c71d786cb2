"""Shared pieces of the benchmarks: a private Sluice deployment and figure printing.

``Stack`` starts what a benchmark measures as real processes — a scratch PostgreSQL database
(migrated, on the server ``SLUICE_BENCH_PG_URL`` names, else on a throw-away cluster of the
benchmark's own), a private ``redis-server``, the admin service (``sluice api``) and, if asked, a
broker worker (``sluice worker``) — and removes them afterwards.  Benchmarks print figures as
ratios against a baseline measured in the same run; they never assert timings.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from migrations import upgrade
from models.db import create_scratch_database, drop_database
from server.embedded_cluster import EmbeddedCluster
from server.embedded_postgres import EmbeddedPostgres
from server.embedded_redis import EmbeddedRedis, free_port
from server.processes import wait_or_kill
from tests.standalone_process import wait_ready

ROOT = Path(__file__).resolve().parents[1]
_postgres: EmbeddedPostgres | None = None


def pg_server_url() -> str:
    """The PostgreSQL server for scratch databases: ``SLUICE_BENCH_PG_URL``, else a throw-away
    cluster started on first use and removed when the process exits."""
    global _postgres
    if os.environ.get("SLUICE_BENCH_PG_URL"):
        return os.environ["SLUICE_BENCH_PG_URL"]
    if _postgres is None:
        _postgres = EmbeddedPostgres().start()
        atexit.register(_postgres.stop)
    return _postgres.url


def arguments(description: str) -> argparse.Namespace:
    """Parse the common flags: ``--quick`` (a smoke run) and ``--json`` (machine output)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    return parser.parse_args()


class Stack:
    """A private deployment: database, Redis, admin service and (optionally) a worker."""

    def __init__(
        self, worker: bool = True, worker_env: dict[str, str] | None = None, cluster: bool = False
    ) -> None:
        self.with_worker = worker
        self.worker_env = worker_env or {}
        self.tmp = Path(tempfile.mkdtemp(prefix="sluice-bench-"))
        self.processes: list[subprocess.Popen] = []
        self.database_url = ""
        # A 3-master Redis Cluster (``cluster``) or one server.
        self.redis: EmbeddedRedis | EmbeddedCluster = (
            EmbeddedCluster(self.tmp / "cluster", masters=3)
            if cluster
            else EmbeddedRedis(self.tmp / "redis")
        )
        self.port = free_port()
        self.worker_port = free_port()
        self.admin_url = f"http://127.0.0.1:{self.port}"

    @property
    def redis_url(self) -> str:
        """URL of the private Redis."""
        return self.redis.url

    def env(self) -> dict[str, str]:
        """Environment of the Sluice processes."""
        env = dict(os.environ)
        env.update(
            DATABASE_URL=self.database_url,
            REDIS_URL=self.redis.url,
            SLUICE_DATA_DIR=str(self.tmp / "data"),
            PYTHONPATH=str(ROOT),
        )
        return env

    def __enter__(self) -> Stack:
        self.database_url = create_scratch_database(pg_server_url(), "sluice_bench")
        upgrade(self.database_url)
        self.redis.start()
        self._spawn(["api", "--host", "127.0.0.1", "--port", str(self.port)], {})
        wait_http(f"{self.admin_url}/admin/v2/brokers/ready")
        if self.with_worker:
            self.start_worker()
        return self

    def start_worker(self, worker_id: str = "bench-worker") -> subprocess.Popen:
        """Start a ``sluice worker`` process and wait until it is ready."""
        port = free_port()
        env = {
            "SLUICE_WORKER_HTTP_PORT": str(port),
            "SLUICE_WORKER_ID": worker_id,
            **self.worker_env,
        }
        process = self._spawn(["worker"], env)
        wait_http(f"http://127.0.0.1:{port}/readyz")
        self.worker_port = port
        return process

    def _spawn(self, args: list[str], extra: dict[str, str]) -> subprocess.Popen:
        log = open(self.tmp / f"{args[0]}-{len(self.processes)}.log", "w")  # noqa: SIM115
        process = subprocess.Popen(
            [sys.executable, "-m", "server.cli", "--log-level", "warning", *args],
            cwd=ROOT,
            env={**self.env(), **extra},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.processes.append(process)
        return process

    def admin(self) -> httpx.Client:
        """An HTTP client on the admin service."""
        return httpx.Client(base_url=self.admin_url, timeout=30)

    def setup_namespace(self, tenant: str = "bench", namespace: str = "ns") -> None:
        """Create a tenant and a namespace."""
        with self.admin() as http:
            http.put(f"/admin/v2/tenants/{tenant}", json={"allowedClusters": ["standalone"]})
            http.put(f"/admin/v2/namespaces/{tenant}/{namespace}")

    def __exit__(self, *exc: object) -> None:
        stop_processes(self.processes)
        self.redis.stop()
        if self.database_url:
            drop_database(pg_server_url(), self.database_url)


def stop_processes(processes: list[subprocess.Popen]) -> None:
    """Terminate ``processes`` (last started first), killing any still running after 20 s."""
    for process in reversed(processes):
        process.terminate()
    for process in processes:
        wait_or_kill(process, 20)


def wait_http(url: str, timeout: float = 60.0) -> None:
    """Wait until ``url`` answers 200."""
    if not wait_ready(url, time.monotonic() + timeout, pause=0.1):
        raise RuntimeError(f"{url} did not become ready")


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values`` (nearest rank)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def report(title: str, rows: list[dict], json_path: str | None = None) -> None:
    """Print a table of figures (and write them as JSON when asked)."""
    print(f"\n## {title}\n")
    if rows:
        columns = list(rows[0])
        print("| " + " | ".join(columns) + " |")
        print("|" + "---|" * len(columns))
        for row in rows:
            print("| " + " | ".join(_fmt(row[c]) for c in columns) + " |")
    print(
        f"\nmachine: {os.cpu_count()} cores, python {sys.version.split()[0]}; "
        f"command: {' '.join([Path(sys.argv[0]).name, *sys.argv[1:]])}"
    )
    if json_path:
        Path(json_path).write_text(json.dumps({"title": title, "rows": rows}, indent=2))


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.0f}"
    return str(value)


def mean(values: list[float]) -> float:
    """Arithmetic mean (nan for no values)."""
    return statistics.fmean(values) if values else float("nan")
