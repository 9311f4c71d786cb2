"""``sluice standalone`` restarts the children it started, and loses nothing acknowledged.

A real standalone runs on free ports (``tests.standalone_process``).

* Its embedded ``redis-server`` is SIGKILLed with a backlog of 2,000 messages that no consumer
  has received yet.  The standalone restarts it on the same port and folder within a bounded
  time; meanwhile ``brokers/ready`` answers 503 and no admin endpoint answers a 500.  Redis
  keeps an append-only file (fsync every second): the writes a killed process had handed to
  the kernel survive, so afterwards a consumer receives all 2,000 messages, and a producer
  made before the kill sends again without being recreated.
* Its Celery report scheduler is SIGKILLed: it is started again and answers a ping.
* Its broker worker is a child process of its own (``sluice worker``), not a task of the
  admin service's event loop: it is SIGKILLed after a message went through it; it is
  started again, the admin API answers meanwhile, and the next message goes through the new
  worker (once the dead one's leases have expired).

The pids come from the standalone's pid files (``<data dir>/run/<name>.pid``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

import sluice
from sluice.protocol import keys
from sluice.protocol.names import TopicName
from tests.standalone_process import Standalone
from tests.workers.conftest import ADMIN

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


def orders_on(standalone: Standalone) -> httpx.Client:
    """An HTTP client on ``standalone``, which holds tenant ``acme`` and namespace
    ``acme/orders``."""
    http = httpx.Client(base_url=standalone.url, timeout=10)
    tenant = http.put(f"{ADMIN}/tenants/acme", json={"allowedClusters": ["standalone"]})
    assert tenant.status_code == 204
    assert http.put(f"{ADMIN}/namespaces/acme/orders").status_code == 204
    return http


def test_killed_redis_is_restarted_with_its_backlog(standalone):
    http = orders_on(standalone)
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
        # Reports are background work: the scheduler (and the Spark it starts) yields the CPU.
        assert os.getpriority(os.PRIO_PROCESS, old) == min(
            19, os.getpriority(os.PRIO_PROCESS, 0) + 10
        )
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


def parent_of(pid: int) -> int:
    """The parent pid of a running process (``/proc/<pid>/status``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("PPid:"):
            return int(line.split()[1])
    raise AssertionError(f"no PPid for {pid}")


def registered_pids(http: httpx.Client, redis_url: str) -> list[int]:
    """The pids of the live workers the admin API lists (from their registrations)."""
    with redis.Redis.from_url(redis_url) as client:
        return [
            int(client.hget(keys.worker_info(worker_id), "pid") or 0)
            for worker_id in http.get(f"{ADMIN}/brokers/standalone").json()
        ]


def round_trip(server: Standalone, body: bytes, timeout_ms: int = 30_000) -> None:
    """One message produced and received (and acknowledged) through the worker."""
    with sluice.Client(server.redis_url) as client:
        topic = "persistent://acme/orders/through-worker"
        consumer = client.subscribe(topic, "sub", consumer_type=sluice.ConsumerType.Shared)
        client.create_producer(topic).send(body)
        message = consumer.receive(timeout_millis=timeout_ms)
        assert message.data() == body
        consumer.acknowledge(message)
        consumer.close()


def test_the_worker_is_a_child_process_restarted_when_killed(standalone):
    http = orders_on(standalone)
    assert http.put(f"{ADMIN}/persistent/acme/orders/through-worker").status_code == 204
    assert standalone.process is not None
    old = read_pid(standalone.data, "worker")
    assert old is not None, standalone.log()[-3000:]
    # Its own process, a child of the standalone, registered under its own pid.
    assert old != standalone.process.pid
    assert parent_of(old) == standalone.process.pid
    assert registered_pids(http, standalone.redis_url) == [old]
    assert httpx.get(f"{standalone.worker_url}/healthz").status_code == 200
    round_trip(standalone, b"before")

    os.kill(old, signal.SIGKILL)
    killed_at = time.monotonic()
    health: list[int] = []
    deadline = killed_at + RESTART_BOUND_SECONDS
    while True:
        health.append(http.get(f"{ADMIN}/brokers/health").status_code)
        pid = read_pid(standalone.data, "worker")
        if pid not in (None, old) and alive(pid):
            try:
                if httpx.get(f"{standalone.worker_url}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
        assert time.monotonic() < deadline, standalone.log()[-3000:]
        time.sleep(0.05)
    new = read_pid(standalone.data, "worker")
    assert new is not None and parent_of(new) == standalone.process.pid
    assert set(health) == {200}, health  # the admin service does not depend on the worker
    assert f"worker (pid {old}) died: killed by SIGKILL" in standalone.log()
    # The supervisor says so once its own readiness check of the new child returns, which
    # may be a moment after the one above saw it ready.
    restarted = f"worker restarted (pid {new}, restart 1)"
    logged_by = time.monotonic() + 10
    while restarted not in standalone.log() and time.monotonic() < logged_by:
        time.sleep(0.05)
    assert restarted in standalone.log()
    # The new worker takes the partitions once the dead one's leases expire (3 s by default).
    round_trip(standalone, b"after")
    # The dead worker's registration expires; the live one is the new process.
    deadline = time.monotonic() + 10
    while registered_pids(http, standalone.redis_url) != [new]:
        assert time.monotonic() < deadline, registered_pids(http, standalone.redis_url)
        time.sleep(0.2)
    # Ctrl-C stops the worker with the rest (the fixture checks the exit code).
    assert standalone.interrupt() == 0, standalone.log()[-3000:]
    assert not alive(new)


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (from ``/proc``), whatever session it runs in."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def running(pid: int) -> bool:
    """Alive and not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("stop", ["sigterm-then-sigkill-1s", "sigterm-with-grace"])
def test_no_child_outlives_the_standalone(tmp_path, stop):
    # Stopped as a service manager stops it, while a report runs (Celery's worker, its beat
    # process and a Spark JVM: a warm Celery shutdown would wait for the report).
    pytest.importorskip("pyspark", reason="the report scheduler needs the 'reports' extra")
    server = Standalone(tmp_path, own_session=True).start()
    assert server.process is not None
    group = server.process.pid
    try:
        wait_for_new_pid(server.data, "report-scheduler", 0, 10)
        assert httpx.post(f"{server.url}{ADMIN}/reports/runs", json={}).status_code == 202
        deadline = time.monotonic() + 90
        while not any(b"java" in cmdline(p) for p in alive_below(group)):
            assert time.monotonic() < deadline, "no report started: " + server.log()[-3000:]
            time.sleep(0.2)
        children = descendants(group)
        os.killpg(group, signal.SIGTERM)
        if stop == "sigterm-then-sigkill-1s":
            time.sleep(1.0)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
            server.process.wait(10)
        else:
            started = time.monotonic()
            assert server.process.wait(15) == 0, server.log()[-3000:]
            assert time.monotonic() - started < 10, server.log()[-3000:]
            # One line when it was up, one when it stopped; Celery's root warning said once.
            log = server.log()
            assert (
                f"Sluice standalone is up: admin API http://localhost:{server.port}/admin/v2, "
                f"console http://localhost:{server.port}/console, data plane "
                f"redis://127.0.0.1:{server.redis_port}/0, data in {server.data.resolve()}"
            ) in log, log[-3000:]
            assert log.rstrip().endswith(
                "Sluice standalone stopped: every process it started has exited"
            ), log[-3000:]
            assert "superuser privileges" not in log
        deadline = time.monotonic() + 10
        while left := [p for p in children if running(p)]:
            assert time.monotonic() < deadline, f"left running: {[cmdline(p)[:200] for p in left]}"
            time.sleep(0.1)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)


def alive_below(pid: int) -> list[int]:
    """The running processes below ``pid`` whose command line can still be read."""
    return [p for p in descendants(pid) if running(p) and Path(f"/proc/{p}/cmdline").exists()]


def cmdline(pid: int) -> bytes:
    """The command line of a process (empty once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
