"""One background thread per client that runs periodic jobs (heartbeats, ack flushes, ...)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class Ticker:
    """Runs registered callables every ``interval`` seconds on a daemon thread."""

    def __init__(self, name: str = "sluice-client") -> None:
        self._jobs: dict[int, tuple[float, Callable[[], None], float]] = {}
        self._next_id = 0
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def every(self, interval: float, job: Callable[[], None]) -> int:
        """Run ``job`` every ``interval`` seconds; returns a handle for ``cancel``."""
        with self._lock:
            self._next_id += 1
            self._jobs[self._next_id] = (interval, job, time.monotonic() + interval)
            handle = self._next_id
        self._wake.set()
        return handle

    def nudge(self, handle: int) -> None:
        """Run a job as soon as possible (then on its interval again)."""
        with self._lock:
            job = self._jobs.get(handle)
            if job is not None:
                self._jobs[handle] = (job[0], job[1], 0.0)
        self._wake.set()

    def cancel(self, handle: int) -> None:
        """Stop running a job."""
        with self._lock:
            self._jobs.pop(handle, None)

    def stop(self) -> None:
        """Stop the thread (jobs are not run again)."""
        self._stopped = True
        self._wake.set()
        if threading.current_thread() is not self._thread:
            self._thread.join(5)

    def _run(self) -> None:
        while not self._stopped:
            now = time.monotonic()
            due: list[tuple[int, Callable[[], None]]] = []
            with self._lock:
                wait = 1.0
                for handle, (interval, job, at) in list(self._jobs.items()):
                    if at <= now:
                        due.append((handle, job))
                        self._jobs[handle] = (interval, job, now + interval)
                        at = now + interval
                    wait = min(wait, at - now)
            for _handle, job in due:
                try:
                    job()
                except Exception:
                    log.exception("background job failed; will run again")
            self._wake.wait(max(wait, 0.0))
            self._wake.clear()
