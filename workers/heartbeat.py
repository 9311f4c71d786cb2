"""The worker's fleet heartbeat, on a thread and a connection of its own.

A worker's leases stand while its heartbeat does (``workers.leases``).  Beaten from the event
loop, the heartbeat waits its turn behind every ready callback: a worker dispatching for ten
thousand subscriptions, or waking hundreds of partitions at once, can take longer than the
lease TTL to get round to it, and the fleet then takes it for dead although it is only busy.
``HeartbeatThread`` renews the registration on time however busy the loop is (a paused or
cut-off process still misses it, as it must): one ``worker_heartbeat.lua`` call and one
pipeline per interval, on a synchronous client of its own.  What a beat reads is handed to the
loop (``deliver``), which acts on it as on a beat of its own (``LeaseOwnership._take_beat``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sluice.protocol import keys
from sluice.protocol.connection import REDIS_FAULTS, connect
from sluice.protocol.scripts import WORKER_HEARTBEAT

log = logging.getLogger(__name__)

WARN_EVERY_SECONDS = 30.0  # one warning per this while Redis does not answer


class Beat(NamedTuple):
    """What one heartbeat read: the script's reply (Redis time, lapsed flag, live workers),
    whether the worker's info hash had expired (re-register), the fence mark, and the
    partitions the admin service unloaded."""

    reply: list
    info_expired: bool
    fenced: bytes | None
    unloaded: list[bytes]


def queue_renewal(pipe: Any, worker_id: str, ttl_ms: int, partitions: int) -> None:
    """Queue the commands that follow the heartbeat script: the info hash (its partition
    count; 1 new field when it had expired), expiries, the fence mark, unloaded partitions."""
    pipe.hset(keys.worker_info(worker_id), "partitions", partitions)
    pipe.pexpire(keys.worker_info(worker_id), ttl_ms * 2)
    pipe.pexpire(keys.worker_leases(worker_id), ttl_ms * 2)
    pipe.hget(keys.worker_info(worker_id), "fenced")
    pipe.smembers(keys.worker_unloaded(worker_id))


def beat_of(reply: list, renewal: list) -> Beat:
    """A ``Beat`` from the script's reply and the replies of ``queue_renewal``'s commands."""
    return Beat(reply, renewal[0] == 1, renewal[3], sorted(renewal[4]))


@dataclass(eq=False)
class HeartbeatThread:
    """Beats every ``interval`` seconds on a daemon thread; hands each beat to ``deliver``
    (called on the thread: it must only schedule work on the loop)."""

    url: str
    worker_id: str
    ttl_ms: int
    interval: float
    partitions: Callable[[], int]
    deliver: Callable[[Beat], None]
    _stop: threading.Event = field(default_factory=threading.Event, init=False, repr=False)
    _thread: threading.Thread = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._thread = threading.Thread(
            target=self._run, name=f"sluice-heartbeat-{self.worker_id}", daemon=True
        )

    def start(self) -> None:
        """Start beating (the first beat one interval from now)."""
        self._thread.start()

    def stop(self) -> None:
        """Stop beating; returns once the thread has ended (or after a few seconds)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(max(5.0, 2 * self.interval))

    def _run(self) -> None:
        timeout = max(self.interval, 0.5)
        client = connect(self.url, socket_timeout=timeout, socket_connect_timeout=timeout)
        script = client.register_script(WORKER_HEARTBEAT.source)
        script_keys, args = WORKER_HEARTBEAT.call(self.worker_id, self.ttl_ms)
        warned = 0.0
        try:
            while not self._stop.wait(self.interval):
                try:
                    reply = script(keys=script_keys, args=args)
                    pipe = client.pipeline(transaction=False)
                    queue_renewal(pipe, self.worker_id, self.ttl_ms, self.partitions())
                    beat = beat_of(reply, pipe.execute())
                except REDIS_FAULTS as exc:
                    if time.monotonic() - warned >= WARN_EVERY_SECONDS:
                        warned = time.monotonic()
                        log.warning("heartbeat of worker %s: %s", self.worker_id, exc)
                    continue
                if self._stop.is_set():
                    break
                try:
                    self.deliver(beat)
                except RuntimeError:  # the loop is closed: the worker has gone
                    break
        finally:
            client.close()
