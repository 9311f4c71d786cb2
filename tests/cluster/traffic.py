"""Traffic for the cluster fault tests: a producer thread and a receiving, acking consumer.

``Sender`` publishes numbered messages at a steady pace and keeps those whose send returned
(acknowledged by Redis); a send that fails during a fault is not counted and not retried.
``Receiver`` receives and acknowledges on a thread and notes every delivery with its partition
and time, so losses, duplicates and per-partition rates show in its record.
"""

from __future__ import annotations

import threading
import time

import sluice
from tests.fleet import Collector


class Sender:
    """Send ``per_second`` messages a second (round robin over the partitions) until stopped."""

    def __init__(self, client: sluice.Client, topic: str, per_second: int) -> None:
        self.producer = client.create_producer(topic, batching_enabled=False)
        self.interval = 1.0 / per_second
        self.sent: list[bytes] = []
        self.failed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Sender:
        self._thread.start()
        return self

    def _run(self) -> None:
        number = 0
        due = time.monotonic()
        while not self._stop.is_set():
            payload = f"m{number}".encode()
            number += 1
            try:
                self.producer.send(payload)
                self.sent.append(payload)
            except Exception:  # the fault: not acknowledged, so not expected
                self.failed += 1
            due += self.interval
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


class SyncSenders:
    """``threads`` producer threads each sending synchronously at ``per_thread_rate()``
    messages a second, keeping every send that returned (``acked``, ``acked_at``)."""

    def __init__(
        self, client: sluice.Client, topic: str, threads: int = 4, per_second: float = 100
    ) -> None:
        self.producers = [
            client.create_producer(topic, send_timeout_millis=5000) for _ in range(threads)
        ]
        self.per_second = per_second
        self.acked: list[bytes] = []
        self.acked_at: list[tuple[float, int]] = []  # (monotonic time, partition)
        self.failed = 0
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(i, p), daemon=True)
            for i, p in enumerate(self.producers)
        ]

    def per_thread_rate(self) -> float:
        """Messages a second each thread sends now."""
        return self.per_second

    def start(self) -> SyncSenders:
        self.started = time.monotonic()
        for thread in self._threads:
            thread.start()
        return self

    def _run(self, index: int, producer: sluice.Producer) -> None:
        number, due = 0, time.monotonic()
        while not self._stop.is_set():
            payload = f"t{index}-m{number}".encode()
            number += 1
            try:
                message_id = producer.send(payload)
                self.acked.append(payload)
                self.acked_at.append((time.monotonic(), message_id.partition()))
            except Exception:  # not acknowledged: not expected anywhere
                self.failed += 1
            due += 1.0 / self.per_thread_rate()
            time.sleep(max(due - time.monotonic(), 0))
            due = max(due, time.monotonic() - 1)  # after a stall, do not burst to catch up

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)


class Receiver(Collector):
    """A Shared consumer that receives and acks on a thread, noting every delivery's arrival
    (seconds since it subscribed) per partition."""

    def __init__(self, client: sluice.Client, topic: str, subscription: str = "audit") -> None:
        self.origin = time.monotonic()
        self.arrivals: dict[int, list[float]] = {}
        super().__init__(client, topic, subscription, receiver_queue_size=1000)

    def note(self, message: sluice.Message) -> None:
        partition = message.message_id().partition()
        self.arrivals.setdefault(partition, []).append(time.monotonic() - self.origin)

    def wait_for(self, expected: list[bytes], timeout: float) -> set[bytes]:
        """Wait until every expected payload arrived; the ones still missing."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            missing = set(expected) - set(self.seen)
            if not missing:
                return missing
            time.sleep(0.1)
        return set(expected) - set(self.seen)


def busiest_window(times: list[float], width: float = 1.0) -> int:
    """The most arrivals within any window of ``width`` seconds."""
    ordered = sorted(times)
    best = 0
    start = 0
    for end, at in enumerate(ordered):
        while at - ordered[start] >= width:
            start += 1
        best = max(best, end - start + 1)
    return best
