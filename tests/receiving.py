"""Consumers that receive on a thread of their own: the one loop every background reader of
the tests (and the benchmarks) runs."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import sluice


def receive_until(
    stop: threading.Event,
    consumer: sluice.Consumer,
    handle: Callable[[sluice.Message], None],
    timeout_millis: int = 100,
    failed: Callable[[Exception], bool] | None = None,
) -> None:
    """Hand every message ``consumer`` receives to ``handle`` until ``stop`` is set.

    A receive that times out is tried again; another failure goes to ``failed``, which
    re-raises it or answers whether to keep receiving (without ``failed`` it propagates)."""
    while not stop.is_set():
        try:
            message = consumer.receive(timeout_millis=timeout_millis)
        except sluice.Timeout:
            continue
        except Exception as exc:
            if failed is None:
                raise
            if failed(exc):
                continue
            return
        handle(message)


def receive_some(
    consumer: sluice.Consumer,
    count: int,
    seconds: float,
    stamp: Callable[[], float],
    ack: bool = True,
) -> list[tuple[float, sluice.Message]]:
    """(``stamp()`` at arrival, message) for up to ``count`` messages received within
    ``seconds``; each acknowledged unless ``ack`` is false."""
    got: list[tuple[float, sluice.Message]] = []
    deadline = time.monotonic() + seconds
    while len(got) < count and time.monotonic() < deadline:
        try:
            message = consumer.receive(timeout_millis=100)
        except sluice.Timeout:
            continue
        got.append((stamp(), message))
        if ack:
            consumer.acknowledge(message)
    return got


class BackgroundReceiver:
    """Receives from ``consumer`` on a daemon thread; subclasses say what a delivery does
    (``received``) and what a failed receive does (``failed``: by default it ends the thread)."""

    def __init__(self, consumer: sluice.Consumer) -> None:
        self.consumer = consumer
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=receive_until,
            args=(self._stop, consumer, self.received),
            kwargs={"failed": self.failed},
            daemon=True,
        )

    def start_receiving(self) -> None:
        """Start the thread (once the subclass has set up what ``received`` writes to)."""
        self._thread.start()

    def stop_receiving(self, timeout: float = 5.0) -> None:
        """Ask the thread to stop and wait for it (at most ``timeout`` seconds)."""
        self._stop.set()
        self._thread.join(timeout)

    def received(self, message: sluice.Message) -> None:
        """One delivery."""
        raise NotImplementedError

    def failed(self, exc: Exception) -> bool:
        """A receive that failed other than by timing out; True to keep receiving."""
        raise exc
