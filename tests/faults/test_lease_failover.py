"""Leases follow the worker registry: a killed worker's partitions move within the lease TTL
and a third, and a worker restarted with its own id takes its partitions back at once.

Leases have no TTL of their own: a worker's liveness is its heartbeat in the registry,
renewed every TTL / 3.  A survivor sees a dead worker leave the live set at its first
heartbeat after the dead one's entry expired, and takes its partitions in the same cycle: at
most TTL + TTL / 3 after the last heartbeat, so after the kill too.  The partitions the survivor
held keep their leases (same tokens): no dispatch gap on them.  A worker with a fixed id that
is restarted before its entry expires holds no token in memory; it takes its own leases over
(new tokens) without waiting for anything to expire, and nobody else touches them meanwhile.
"""

from __future__ import annotations

import threading
import time

import pytest

from tests.fleet import LEASE_TTL, Fleet
from tests.workers.conftest import ADMIN, wait_until

pytestmark = pytest.mark.faults

TOPIC = "persistent://acme/orders/failover"
PARTITIONS = 16
# Polling every 20 ms, a process the kernel has to reap, and a loaded two-core machine.
TOLERANCE = 1.0
RESTART_TTL = 15.0  # long enough for a restart to come back before its entry expires


def epoch(token: str) -> int:
    return int(token.rpartition(":")[2])


def test_a_killed_workers_partitions_move_within_the_ttl_and_a_third(fleet, http):
    path = f"{ADMIN}/persistent/acme/orders/failover/partitions"
    assert http.put(path, json=PARTITIONS).status_code == 204
    owners = fleet.start_settled(TOPIC, PARTITIONS, "w1", "w2", timeout=20)
    assert set(owners.values()) == {"w1", "w2"}
    kept = {p: t for p, t in fleet.tokens(TOPIC, PARTITIONS).items() if owners[p] == "w2"}
    fleet.processes["w1"].kill()
    killed = time.monotonic()
    wait_until(lambda: fleet.settled(TOPIC, PARTITIONS, {"w2"}), timeout=15, every=0.02)
    took = time.monotonic() - killed
    tokens = fleet.tokens(TOPIC, PARTITIONS)
    report = f"moved {PARTITIONS - len(kept)} partitions in {took:.2f} s (TTL {LEASE_TTL} s)"
    assert took < LEASE_TTL + LEASE_TTL / 3 + TOLERANCE, report
    # The survivor's own partitions kept their leases throughout.
    assert {p: tokens[p] for p in kept} == kept, report
    print(report)


@pytest.fixture
def slow_fleet(http, namespace, settings, tmp_path):
    """Workers whose registry entries outlive a restart."""
    fleet = Fleet(settings, tmp_path, env={"SLUICE_WORKER_LEASE_TTL_SECONDS": str(RESTART_TTL)})
    yield fleet
    fleet.stop_all()


class Watch:
    """Records every token a partition's lease holds while a worker restarts."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self.seen: dict[str, set[str]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for partition, token in self.fleet.tokens(TOPIC, PARTITIONS).items():
                if token:
                    self.seen.setdefault(partition, set()).add(token)
            time.sleep(0.02)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


def test_a_worker_restarted_with_its_id_takes_its_partitions_back_at_once(slow_fleet, http):
    fleet = slow_fleet
    path = f"{ADMIN}/persistent/acme/orders/failover/partitions"
    assert http.put(path, json=PARTITIONS).status_code == 204
    owners = fleet.start_settled(TOPIC, PARTITIONS, "w1", "w2", timeout=20)
    before = fleet.tokens(TOPIC, PARTITIONS)
    own = {p for p, owner in owners.items() if owner == "w1"}
    assert own and len(own) < PARTITIONS
    watch = Watch(fleet)
    try:
        fleet.processes["w1"].kill()
        fleet.processes["w1"].wait(10)
        killed = time.monotonic()
        fleet.start("w1")  # its registry entry is still live

        def retaken() -> bool:
            tokens = fleet.tokens(TOPIC, PARTITIONS)
            return all(
                tokens[p] and tokens[p].startswith("w1:") and epoch(tokens[p]) > epoch(before[p])
                for p in own
            )

        wait_until(retaken, timeout=RESTART_TTL, every=0.05)
        took = time.monotonic() - killed
    finally:
        watch.stop()
    after = fleet.tokens(TOPIC, PARTITIONS)
    report = f"w1 took its {len(own)} partitions back {took:.2f} s after the kill"
    # Before its old entry expired, and nobody else held them meanwhile.
    assert took < RESTART_TTL, report
    assert all(t.startswith("w1:") for p in own for t in watch.seen[p]), (report, watch.seen)
    # w2's partitions were not touched.
    assert {p: after[p] for p in before if p not in own} == {
        p: before[p] for p in before if p not in own
    }, report
    assert fleet.settled(TOPIC, PARTITIONS, {"w1", "w2"}) == owners, report
    print(report)
