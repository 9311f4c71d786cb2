"""A worker paused (SIGSTOP) past its lease must not dispatch what another worker took over.

The owner of a one-partition topic is frozen while a producer keeps sending, so it stops
with dispatch work in hand.  Its heartbeat expires; the other worker sees it leave the live set
and takes the lease over (a new fencing token, a higher epoch) and dispatches.  On SIGCONT the
old owner's next dispatch call presents the stale token and is refused, and its next heartbeat
finds its registry entry lapsed: it drops the tokens of the leases taken meanwhile, stops
their runners, and registers again.  Every message arrives exactly once, and the
subscription's dispatch counter equals the deliveries, so no entry was dispatched by two
owners.  Back in the fleet, the partition ends up with the owner rendezvous hashing names,
under a new lease.
"""

from __future__ import annotations

import signal
import threading
import time

import pytest

import sluice
from sluice.protocol import keys
from sluice.protocol.names import TopicName
from tests.fleet import LEASE_TTL, Collector, with_signal
from tests.workers.conftest import ADMIN, wait_until

pytestmark = pytest.mark.faults

TOPIC = "persistent://acme/orders/pause"


class SteadyProducer:
    """Sends ``m0``, ``m1``, ... at about ``rate`` messages a second until stopped."""

    def __init__(self, client: sluice.Client, rate: int = 400) -> None:
        self.producer = client.create_producer(TOPIC, block_if_queue_full=True)
        self.rate = rate
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        started = time.monotonic()
        while not self._stop.is_set():
            for _ in range(20):
                self.producer.send_async(f"m{self.sent}".encode(), None)
                self.sent += 1
            self.producer.flush()
            time.sleep(max(0.0, started + self.sent / self.rate - time.monotonic()))

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(10)
        self.producer.flush()
        return self.sent


def epoch(token: str) -> int:
    return int(token.rpartition(":")[2])


def test_a_paused_worker_does_not_dispatch_what_it_lost(fleet, http, settings):
    assert http.put(f"{ADMIN}/persistent/acme/orders/pause").status_code == 204
    partition = TopicName.from_full(TOPIC)
    fleet.start_settled(TOPIC, 0, "w1", "w2")
    paused_token = fleet.tokens(TOPIC, 0)[TOPIC]
    owner = paused_token.rpartition(":")[0]
    other = "w2" if owner == "w1" else "w1"
    with sluice.Client(settings.redis_url) as client:
        collector = Collector(client, TOPIC)
        producer = SteadyProducer(client)
        wait_until(lambda: len(collector.seen) >= 100, timeout=10)  # the owner is dispatching
        with_signal(fleet.processes[owner], signal.SIGSTOP)
        paused_at = time.monotonic()
        try:
            # Past the lease: the other worker takes the partition over and dispatches.
            new_token = wait_until(
                lambda: (t := fleet.tokens(TOPIC, 0)[TOPIC]) and t.startswith(other) and t,
                timeout=LEASE_TTL * 4,
            )
            delivered = len(collector.seen)
            wait_until(lambda: len(collector.seen) >= delivered + 200, timeout=10)
            taken_over = time.monotonic() - paused_at
        finally:
            with_signal(fleet.processes[owner], signal.SIGCONT)
        # Resumed, the old owner finds that its heartbeat lapsed and drops its tokens.
        wait_until(lambda: "had lapsed" in fleet.log(owner), timeout=LEASE_TTL * 4)
        time.sleep(0.5)  # the producer goes on across the resumption
        total = producer.stop()
        wait_until(lambda: len(collector.seen) == total, timeout=20)
        time.sleep(0.5)  # late duplicates, if any, would show up now
        collector.stop()
        stats = fleet.redis.hgetall(keys.sub_key(partition, "sub", "stats"))
    dispatched = int(stats.get(b"msg_out", 0))
    report = (
        f"sent {total}, received {len(collector.seen)} distinct, {collector.duplicates} "
        f"duplicates, dispatched {dispatched}; token {paused_token} -> {new_token} after "
        f"{taken_over:.2f} s paused"
    )
    assert set(collector.seen) == {f"m{i}".encode() for i in range(total)}, report
    assert collector.duplicates == 0, report
    assert dispatched == total, report
    # Back in the registry, the old owner may win the partition again, but only with a new
    # lease: a fresh token, never the one it was paused with.
    assert epoch(new_token) > epoch(paused_token), report
    assert fleet.tokens(TOPIC, 0)[TOPIC] != paused_token, report
    # Losing the lease is handled, not an error (it once raised KeyError when a fenced
    # dispatcher had dropped the token while a renewal was in flight).
    assert "failed; will run again" not in fleet.log(owner), report
    assert fleet.processes[owner].poll() is None, report  # it lived on
    # It registered again, and the fleet settles as rendezvous hashing says.
    assert owner in fleet.live(), report
    settled = wait_until(lambda: fleet.settled(TOPIC, 0, {"w1", "w2"}), timeout=LEASE_TTL * 4)
    final = fleet.tokens(TOPIC, 0)[TOPIC]
    assert epoch(final) >= epoch(new_token), (report, settled, final)
