"""Real ``sluice worker`` processes for end-to-end and fault-injection tests.

``Fleet`` starts workers as separate processes (``python -m server.cli worker``), so a test
can kill one with SIGKILL or pause it with SIGSTOP, and reads partition ownership straight
from the leases in Redis.  ``Collector`` is a Shared consumer that receives and acks on a
thread and counts every delivery, so duplicates and losses show up in its tally.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import sluice
from server.processes import wait_or_kill
from sluice.protocol import keys
from sluice.protocol.connection import connect
from sluice.protocol.names import TopicName
from tests import ROOT
from tests.receiving import BackgroundReceiver
from tests.workers.conftest import wait_until
from workers.leases import rendezvous_owner

LEASE_TTL = 1.5


class Fleet:
    """Worker processes started and stopped by a test.

    ``redis_url`` and ``database_url`` default to the session's servers; ``env`` adds or
    overrides environment variables of every worker.
    """

    def __init__(
        self,
        settings,
        tmp_path: Path,
        *,
        redis_url: str | None = None,
        database_url: str | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.settings = settings
        self.tmp = tmp_path
        self.redis_url = redis_url or settings.redis_url
        self.database_url = database_url or settings.database_url
        self.env = env or {}
        self.processes: dict[str, subprocess.Popen] = {}
        # Earlier processes of a worker id started again: reaped at the end, so that no
        # Popen is collected unwaited (a ResourceWarning, an error in whichever test runs then).
        self.retired: list[subprocess.Popen] = []
        self.redis = connect(self.redis_url)

    def start(
        self, worker_id: str, *, redis_url: str | None = None, wait: bool = True
    ) -> subprocess.Popen:
        """Start a worker and (unless ``wait`` is false) wait until it has registered;
        ``redis_url`` is this worker's own way to Redis (e.g. through a proxy), the fleet's by
        default."""
        env = {
            **os.environ,
            "DATABASE_URL": self.database_url,
            "REDIS_URL": redis_url or self.redis_url,
            "SLUICE_WORKER_ID": worker_id,
            "SLUICE_WORKER_HTTP_PORT": "0",
            "SLUICE_WORKER_LEASE_TTL_SECONDS": str(LEASE_TTL),
            "SLUICE_STATS_INTERVAL_SECONDS": "1",
            **self.env,
        }
        with self.log_path(worker_id).open("wb") as log:  # the worker keeps its own copy
            process = subprocess.Popen(
                [sys.executable, "-m", "server.cli", "--log-level", "info", "worker"],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        previous = self.processes.get(worker_id)
        if previous is not None:
            self.retired.append(previous)  # killed by the test: reaped by stop_all
        self.processes[worker_id] = process
        if wait:
            wait_until(lambda: worker_id in self.live(), timeout=30, every=0.1)
        return process

    def log_path(self, worker_id: str) -> Path:
        """Where a worker's output goes."""
        return self.tmp / f"{worker_id}.log"

    def log(self, worker_id: str) -> str:
        """A worker's output so far."""
        return self.log_path(worker_id).read_text(errors="replace")

    def live(self) -> set[str]:
        """Worker ids in the registry."""
        return {w.decode() for w in self.redis.zrange(keys.WORKERS, 0, -1)}

    def tokens(self, topic: str, partitions: int) -> dict[str, str | None]:
        """partition -> fencing token of its lease (None when free); ``partitions=0`` names a
        non-partitioned topic."""
        base = TopicName.from_full(topic)
        names = [base.partition(i) for i in range(partitions)] if partitions else [base]
        answer = {}
        for name in names:
            token = self.redis.get(keys.lease(name))
            answer[name.full] = token.decode() if token else None
        return answer

    def owners(self, topic: str, partitions: int) -> dict[str, str | None]:
        """partition -> worker id holding its lease (None when free)."""
        return {
            name: token.rpartition(":")[0] if token else None
            for name, token in self.tokens(topic, partitions).items()
        }

    def settled(self, topic: str, partitions: int, workers: set[str]) -> dict[str, str] | None:
        """The owners once every partition is owned as rendezvous hashing over ``workers``
        assigns it."""
        owners = self.owners(topic, partitions)
        expected = {p: rendezvous_owner(sorted(workers), p) for p in owners}
        return owners if owners == expected else None

    def start_settled(
        self, topic: str, partitions: int, *workers: str, timeout: float = 15
    ) -> dict[str, str]:
        """Start ``workers`` and wait until they share the partitions of ``topic`` as
        rendezvous hashing assigns them: the owners."""
        for worker_id in workers:
            self.start(worker_id)
        return wait_until(lambda: self.settled(topic, partitions, set(workers)), timeout=timeout)

    def stop_all(self) -> None:
        """Resume paused workers, then stop every worker (SIGTERM, SIGKILL after 15 s) and
        reap every process this fleet started."""
        processes = [*self.retired, *self.processes.values()]
        for process in processes:
            if process.poll() is None:
                with_signal(process, signal.SIGCONT)
                process.terminate()
        for process in processes:
            wait_or_kill(process, 15)
        self.redis.close()


def with_signal(process: subprocess.Popen, sig: int) -> None:
    """Send ``sig`` to a process that is still running."""
    if process.poll() is None:
        os.kill(process.pid, sig)


class Collector(BackgroundReceiver):
    """A Shared consumer that receives and acks on a thread, counting every delivery."""

    def __init__(
        self,
        client: sluice.Client,
        topic: str,
        subscription: str = "sub",
        receiver_queue_size: int = 50,
    ) -> None:
        super().__init__(
            client.subscribe(
                topic,
                subscription,
                consumer_type=sluice.ConsumerType.Shared,
                receiver_queue_size=receiver_queue_size,
            )
        )
        self.seen: dict[bytes, int] = {}
        self.receipts: list[float] = []
        self.last_receipt = 0.0
        self.errors: list[BaseException] = []
        self.start_receiving()

    def failed(self, exc: Exception) -> bool:
        """A fault test's outage: note it and keep going."""
        self.errors.append(exc)
        time.sleep(0.05)
        return True

    def received(self, message: sluice.Message) -> None:
        self.seen[message.data()] = self.seen.get(message.data(), 0) + 1
        self.last_receipt = time.monotonic()
        self.receipts.append(self.last_receipt)
        self.note(message)
        try:
            self.consumer.acknowledge(message)
        except Exception as exc:
            self.errors.append(exc)

    def note(self, message: sluice.Message) -> None:
        """Called for every delivery before it is acknowledged; subclasses note more."""

    @property
    def duplicates(self) -> int:
        """Deliveries beyond the first of each message."""
        return sum(n - 1 for n in self.seen.values())

    def stop(self) -> None:
        """Stop receiving (the consumer stays open until its client closes)."""
        self.stop_receiving()
