"""PostgreSQL restarted (``pg_ctl restart -m immediate``) under concurrent admin writes.

The test has a PostgreSQL server and a Redis of its own (``tests.faults.postgres``): the
session's are shared with other tests.  An admin server (uvicorn, the real app) and an
in-process worker use them.  Eight writer threads each set the dispatch rate of their own
topic (four) or namespace (four) over HTTP, again and again, each write a new value with a
request id of its own; meanwhile the test restarts PostgreSQL without a checkpoint (every
backend killed at once, the log replayed at the next start).  Then:

* every answer is a 2xx, or a 503 with a JSON ``reason``; never another status, never a
  client timeout, and none takes longer than ``ANSWER_BOUND``;
* every write answered 2xx is in the database: its audit entry (same transaction as the
  change, found by its request id) is there, and each target's rate is its last 2xx write or
  a 503 write after it (a 503 write may or may not have committed: the COMMIT may have been
  lost before or after the server applied it; the test reports how many of each it saw);
* each final value is enforced: ``GET ...?applied=true`` on a topic answers it, and the
  worker's limit for that topic has it; the outbox relay publishes every change event;
* the admin service, never restarted, answers writes with 2xx again within
  ``RECOVERY_BOUND`` of the restart's end, for every writer.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from api.app import create_app
from models.db import make_sync_engine
from server.embedded_redis import EmbeddedRedis
from sluice.protocol.names import TopicName
from tests.conftest import ServerThread
from tests.faults.postgres import RestartablePostgres
from tests.workers.conftest import ADMIN, WorkerThread, rate, wait_until

pytestmark = pytest.mark.faults

WRITERS = 8
WARM_UP_SECONDS = 1.0  # writes before the restart, once every writer has had answers
AFTER_SECONDS = 2.0  # writes after the restart returned
ANSWER_BOUND = 15.0  # seconds: no write answer takes longer
RECOVERY_BOUND = 10.0  # seconds after the restart: every writer has a 2xx again


@dataclasses.dataclass(frozen=True)
class Target:
    """What one writer sets: a topic's rate, or its namespace's."""

    index: int

    @property
    def namespace(self) -> str:
        return f"acme/ns{self.index}"

    @property
    def topic(self) -> str:
        return f"persistent://{self.namespace}/t"

    @property
    def on_topic(self) -> bool:
        return self.index % 2 == 0

    @property
    def rate_path(self) -> str:
        if self.on_topic:
            return f"{ADMIN}/persistent/{self.namespace}/t/dispatchRate"
        return f"{ADMIN}/namespaces/{self.namespace}/dispatchRate"

    def value(self, sequence: int) -> int:
        """A value no other write uses."""
        return 1000 * (self.index + 1) + sequence


@dataclasses.dataclass(frozen=True)
class Answer:
    """One write and what came back."""

    request_id: str
    value: int
    sent_at: float
    seconds: float
    status: int  # 0: no answer (client error or timeout)
    reason: object = None
    error: str = ""


class Writer(threading.Thread):
    """Sets its target's rate with new values until told to stop."""

    def __init__(self, base_url: str, target: Target) -> None:
        super().__init__(daemon=True)
        self.base_url = base_url
        self.target = target
        self.answers: list[Answer] = []
        self.stop = threading.Event()

    def run(self) -> None:
        with httpx.Client(base_url=self.base_url, timeout=ANSWER_BOUND + 15) as api:
            sequence = 0
            while not self.stop.is_set():
                sequence += 1
                self.answers.append(self.write(api, sequence))

    def write(self, api: httpx.Client, sequence: int) -> Answer:
        value = self.target.value(sequence)
        request_id = f"restart-{self.target.index}-{sequence}"
        started = time.monotonic()
        try:
            response = api.post(
                self.target.rate_path,
                json=rate(msg=value),
                headers={"X-Request-Id": request_id},
            )
        except httpx.HTTPError as exc:
            seconds = time.monotonic() - started
            return Answer(request_id, value, started, seconds, 0, error=repr(exc))
        reason = None
        if response.status_code >= 300:
            try:
                reason = response.json().get("reason")
            except ValueError:
                reason = response.text
        seconds = time.monotonic() - started
        return Answer(request_id, value, started, seconds, response.status_code, reason)


@pytest.fixture
def private_postgres() -> Iterator[RestartablePostgres]:
    server = RestartablePostgres().start()
    yield server
    server.stop()


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(tmp_path / "redis")
    server.start()
    yield server
    server.stop()


def audited_requests(url: str) -> set[str]:
    """Request ids of the dispatch-rate writes the database has an audit entry of."""
    query = "SELECT request_id FROM audit_log WHERE request_id LIKE 'restart-%'"
    return {row[0] for row in query_rows(url, query)}


def unpublished_events(url: str) -> int:
    """Change events not published yet (the outbox relay marks them once they are)."""
    query = "SELECT count(*) FROM outbox_events WHERE published_at IS NULL"
    return query_rows(url, query)[0][0]


def query_rows(url: str, query: str) -> list:
    engine = make_sync_engine(url)
    try:
        with engine.connect() as connection:
            return list(connection.execute(text(query)))
    finally:
        engine.dispose()


def stored_value(api: httpx.Client, target: Target) -> int | None:
    body = api.get(target.rate_path).json()
    return None if body is None else body["dispatchThrottlingRateInMsg"]


def applied_value(api: httpx.Client, target: Target) -> int | None:
    path = f"{ADMIN}/persistent/{target.namespace}/t/dispatchRate"
    body = api.get(path, params={"applied": "true"}).json()
    return None if body is None else body["dispatchThrottlingRateInMsg"]


def worker_value(worker: WorkerThread, target: Target) -> int:
    partition = TopicName.from_full(target.topic)
    return worker.call(lambda w: w.policy.limits(partition).topic.permits_msg)


def possible_finals(answers: list[Answer]) -> set[int]:
    """Values a target may end with: its last 2xx write, or a 503 write after it."""
    last_ok = max((i for i, a in enumerate(answers) if 200 <= a.status < 300), default=-1)
    later = {a.value for a in answers[last_ok + 1 :] if a.status == 503}
    return later | ({answers[last_ok].value} if last_ok >= 0 else set())


def first_success_after(answers: list[Answer], moment: float) -> Answer | None:
    """The first write sent at or after ``moment`` that was answered 2xx."""
    return next((a for a in answers if a.sent_at >= moment and 200 <= a.status < 300), None)


def recovered_by(writers: list[Writer], moment: float, timeout: float) -> None:
    """Wait (at most ``timeout``) until every writer had a 2xx write sent after ``moment``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(first_success_after(list(w.answers), moment) for w in writers):
            return
        time.sleep(0.05)


def set_up(api: httpx.Client, targets: list[Target]) -> None:
    assert api.put(f"{ADMIN}/tenants/acme", json={"allowedClusters": ["standalone"]}).is_success
    for target in targets:
        assert api.put(f"{ADMIN}/namespaces/{target.namespace}").is_success
        assert api.put(f"{ADMIN}/persistent/{target.namespace}/t").is_success


def test_database_restart(settings, private_postgres, private_redis):
    own = settings.model_copy(
        update={"database_url": private_postgres.url, "redis_url": private_redis.url}
    )
    admin = ServerThread(create_app(own)).start()
    worker = WorkerThread(
        own.model_copy(
            update={
                "worker_http_port": 0,
                "worker_resync_seconds": 1.0,
                "worker_id": "restart-worker",
            }
        )
    ).start()
    targets = [Target(i) for i in range(WRITERS)]
    writers = [Writer(admin.url, target) for target in targets]
    try:
        with httpx.Client(base_url=admin.url, timeout=30) as api:
            set_up(api, targets)
            for writer in writers:
                writer.start()
            # Every writer has had answers (on a loaded machine its thread may start late),
            # then some more: writes are in flight whenever the restart begins.
            wait_until(lambda: all(len(w.answers) >= 2 for w in writers), timeout=60)
            time.sleep(WARM_UP_SECONDS)
            restart_began = time.monotonic()
            private_postgres.restart_immediately()
            restarted = time.monotonic()
            recovered_by(writers, restarted, RECOVERY_BOUND + ANSWER_BOUND)
            time.sleep(AFTER_SECONDS)
            for writer in writers:
                writer.stop.set()
            for writer in writers:
                writer.join(ANSWER_BOUND + 30)
                assert not writer.is_alive(), f"writer {writer.target.index} hangs"

            answers = {w.target.index: w.answers for w in writers}
            audited = audited_requests(private_postgres.url)
            finals = {t.index: possible_finals(answers[t.index]) for t in targets}
            stored = {t.index: stored_value(api, t) for t in targets}
            # Enforcement follows within moments: the worker resyncs every second.
            for target in targets:
                expected = stored[target.index]
                wait_until(lambda t=target, v=expected: applied_value(api, t) == v, timeout=10)
                wait_until(lambda t=target, v=expected: worker_value(worker, t) == v, timeout=15)
            # The outbox relay publishes every committed event, those of a write whose COMMIT
            # was in doubt (answered 503) too, once they are older than its grace period (5 s).
            wait_until(lambda: unpublished_events(private_postgres.url) == 0, timeout=20)
    finally:
        for writer in writers:
            writer.stop.set()
        worker.stop()
        admin.stop()

    everything = [a for target_answers in answers.values() for a in target_answers]
    unavailable = [a for a in everything if a.status == 503]
    firsts = [first_success_after(a, restarted) for a in answers.values()]
    recovery = max(
        (f.sent_at + f.seconds - restarted for f in firsts if f is not None), default=float("nan")
    )
    in_flight = [a for a in everything if a.sent_at <= restart_began <= a.sent_at + a.seconds]
    report = (
        f"restart took {restarted - restart_began:.2f} s; {len(everything)} writes, "
        f"{len(in_flight)} in flight when it began, "
        f"{sum(200 <= a.status < 300 for a in everything)} 2xx, {len(unavailable)} 503 "
        f"({sum(a.request_id in audited for a in unavailable)} of them committed anyway), "
        f"slowest answer {max(a.seconds for a in everything):.2f} s, "
        f"every writer answered 2xx again {recovery:.2f} s after the restart"
    )
    print(report)
    assert in_flight, ("no write was in flight when the restart began", report)
    for answer in everything:
        assert answer.status != 0, (answer, report)
        assert 200 <= answer.status < 300 or answer.status == 503, (answer, report)
        if answer.status == 503:
            assert isinstance(answer.reason, str) and answer.reason, (answer, report)
        assert answer.seconds <= ANSWER_BOUND, (answer, report)
    acknowledged = [a for a in everything if 200 <= a.status < 300]
    lost = [a for a in acknowledged if a.request_id not in audited]
    assert not lost, (lost, report)
    for target in targets:
        assert stored[target.index] in finals[target.index], (target, stored, finals, report)
    for index, target_answers in answers.items():
        first = first_success_after(target_answers, restarted)
        assert first is not None, (f"writer {index}: no 2xx write after the restart", report)
        assert first.sent_at + first.seconds - restarted <= RECOVERY_BOUND, (index, first, report)
