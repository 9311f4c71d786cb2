"""``sluice standalone`` restarts the children it started, and loses nothing acknowledged.

A real standalone runs on free ports (``tests.standalone_process``).

* Its embedded ``redis-server`` is SIGKILLed with a backlog of 2,000 messages that no consumer
  has received yet.  The standalone restarts it on the same port and folder within a bounded
  time; meanwhile ``brokers/ready`` answers 503 and no admin endpoint answers a 500.  Redis
  keeps an append-only file (fsync every second): the writes a killed process had handed to
  the kernel survive, so afterwards a consumer receives all 2,000 messages, and a producer
  made before the kill sends again without being recreated.
* Its Celery report scheduler is SIGKILLed: it is started again and answers a ping.
* The worker shares the standalone's event loop, so it is supervised as a task
  (``server.supervisor.supervise_task`` around ``workers.main.run_worker``, as the standalone
  runs it): when one of its loops ends, the worker stops, raises, and a new one starts and
  takes the partitions again.  Here it runs on the session's database and Redis, and the
  loop is cancelled from outside.

The pids come from the standalone's pid files (``<data dir>/run/<name>.pid``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

import sluice
import workers.main
from server.supervisor import Backoff, supervise_task
from sluice.protocol import keys
from sluice.protocol.names import TopicName
from tests.standalone_process import Standalone
from tests.workers.conftest import ADMIN
from workers.main import build_worker
from workers.worker import Worker

pytestmark = pytest.mark.faults

TOPIC = "persistent://acme/orders/kept"
MESSAGES = 2_000
RESTART_BOUND_SECONDS = 15.0  # first restart after 0.5 s; the rest is start-up and loading
# Endpoints that need Redis: while it is down they may answer 503, never 500.
PROBES = (
    f"{ADMIN}/persistent/acme/orders/kept/stats",
    f"{ADMIN}/persistent/acme/orders/kept/subscriptions",
    f"{ADMIN}/persistent/acme/orders/kept/lookup",
    f"{ADMIN}/persistent/acme/orders",
    f"{ADMIN}/brokers/standalone/workers",
)


def backlog(redis_url: str) -> int:
    """Entries of the topic the subscription has not acknowledged (read from Redis)."""
    with redis.Redis.from_url(redis_url) as client:
        groups = client.xinfo_groups(keys.log(TopicName.from_full(TOPIC)))
    (group,) = [g for g in groups if g["name"] == b"sub"]
    return int(group["lag"]) + int(group["pending"])


def read_pid(data: Path, name: str) -> int | None:
    try:
        return int((data / "run" / f"{name}.pid").read_text())
    except (FileNotFoundError, ValueError):
        return None


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_for_new_pid(data: Path, name: str, old: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while True:
        pid = read_pid(data, name)
        if pid is not None and pid != old and alive(pid):
            return pid
        assert time.monotonic() < deadline, f"{name} was not restarted within {timeout} s"
        time.sleep(0.05)


@pytest.fixture
def standalone(tmp_path) -> Iterator[Standalone]:
    """A standalone without the report scheduler."""
    server = Standalone(tmp_path, "--no-reports").start()
    yield server
    assert server.interrupt() == 0, server.log()[-3000:]


def test_killed_redis_is_restarted_with_its_backlog(standalone):
    http = httpx.Client(base_url=standalone.url, timeout=10)
    assert (
        http.put(f"{ADMIN}/tenants/acme", json={"allowedClusters": ["standalone"]}).status_code
        == 204
    )
    assert http.put(f"{ADMIN}/namespaces/acme/orders").status_code == 204
    assert http.put(f"{ADMIN}/persistent/acme/orders/kept").status_code == 204
    assert http.put(f"{ADMIN}/persistent/acme/orders/kept/subscription/sub").status_code == 204

    with sluice.Client(standalone.redis_url) as client:
        producer = client.create_producer(TOPIC, block_if_queue_full=True)
        for i in range(MESSAGES):
            producer.send_async(f"m{i}".encode(), None)
        producer.flush()
        assert backlog(standalone.redis_url) == MESSAGES

        old = read_pid(standalone.data, "redis-server")
        assert old is not None, standalone.log()[-3000:]
        os.kill(old, signal.SIGKILL)
        killed_at = time.monotonic()

        ready_statuses: list[int] = []
        answers: dict[str, set[int]] = {path: set() for path in PROBES}
        deadline = killed_at + RESTART_BOUND_SECONDS
        while not (ready_statuses and ready_statuses[-1] == 200 and 503 in ready_statuses):
            assert time.monotonic() < deadline, (ready_statuses, standalone.log()[-3000:])
            ready_statuses.append(http.get(f"{ADMIN}/brokers/ready").status_code)
            for path in PROBES:
                answers[path].add(http.get(path).status_code)
            time.sleep(0.05)
        back_after = time.monotonic() - killed_at
        new = wait_for_new_pid(standalone.data, "redis-server", old, 1.0)

        report = f"ready: {ready_statuses}; probes: {answers}; back after {back_after:.1f} s"
        assert set(ready_statuses) == {503, 200}, report
        assert all(statuses <= {200, 503} for statuses in answers.values()), report
        assert f"redis-server (pid {old}) died: killed by SIGKILL" in standalone.log(), report
        assert f"redis-server restarted (pid {new}" in standalone.log(), report

        print(report)
        print(standalone.log()[-2500:])
        # Every acknowledged send is still there, none delivered yet.
        assert backlog(standalone.redis_url) == MESSAGES, report
        # The producer made before the kill carries on.
        producer.send(b"after")
        consumer = client.subscribe(TOPIC, "sub", consumer_type=sluice.ConsumerType.Shared)
        received = set()
        deadline = time.monotonic() + 30
        while len(received) < MESSAGES + 1 and time.monotonic() < deadline:
            try:
                message = consumer.receive(timeout_millis=1000)
            except sluice.Timeout:
                continue
            received.add(message.data())
            consumer.acknowledge(message)
        expected = {f"m{i}".encode() for i in range(MESSAGES)} | {b"after"}
        assert received == expected, f"{len(expected - received)} missing; {report}"
    assert standalone.process is not None and standalone.process.poll() is None


def test_killed_report_scheduler_is_restarted(tmp_path):
    pytest.importorskip("pyspark", reason="the report scheduler needs the 'reports' extra")
    from models.settings import Settings
    from reports.celery_app import make_celery

    server = Standalone(tmp_path).start()
    try:
        old = wait_for_new_pid(server.data, "report-scheduler", 0, 10)
        os.kill(old, signal.SIGKILL)
        new = wait_for_new_pid(server.data, "report-scheduler", old, 5)
        assert f"report-scheduler (pid {old}) died: killed by SIGKILL" in server.log()
        # The new scheduler is connected to the broker and answers.
        app = make_celery(Settings(redis_url=server.redis_url, data_dir=server.data))
        try:
            deadline = time.monotonic() + 30
            while not app.control.ping(timeout=1.0):
                assert time.monotonic() < deadline, server.log()[-3000:]
        finally:
            app.close()
        assert alive(new)
    finally:
        assert server.interrupt() == 0, server.log()[-3000:]


def test_a_worker_whose_loop_dies_is_started_again(http, settings, monkeypatch, caplog):
    caplog.set_level(logging.INFO)
    built: list[Worker] = []

    def build(*args, **kwargs) -> Worker:
        worker = build_worker(*args, **kwargs)
        built.append(worker)
        return worker

    monkeypatch.setattr(workers.main, "build_worker", build)
    worker_settings = settings.model_copy(update={"worker_http_port": 0, "worker_id": "w-sup"})

    async def scenario() -> None:
        stop = asyncio.Event()
        supervisor = asyncio.create_task(
            supervise_task(
                "worker",
                lambda: workers.main.run_worker(worker_settings, stop),
                stop,
                Backoff(initial=0.1),
            )
        )
        try:
            await until(lambda: built and built[0].ready)
            loop = next(task for task in built[0].loops if task.get_name() == "events")
            loop.cancel()
            await until(lambda: len(built) == 2 and built[1].ready)
            assert not built[0].ready
        finally:
            stop.set()
            await asyncio.wait_for(supervisor, 30)

    asyncio.run(scenario())
    assert "worker died: RuntimeError: worker w-sup: its events loop was cancelled" in caplog.text
    assert "worker died; restarting in 0.1 s" in caplog.text


async def until(predicate, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met"
        await asyncio.sleep(0.05)
