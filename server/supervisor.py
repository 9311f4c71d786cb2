"""Supervision for ``sluice standalone``: restart what dies, with exponential backoff.

``SupervisedProcess`` watches a child process (the embedded ``redis-server``, the broker
worker, the Celery report scheduler).  A child that dies is logged with its exit code or
signal and started again after a delay that starts at 0.5 s and doubles up to 10 s; the delay
goes back to 0.5 s once a child has run for 30 s.  Nothing is restarted once the standalone
is stopping.  Each child's pid is kept in ``<data dir>/run/<name>.pid`` while it runs.  A running
child is awaited through a process file descriptor (Linux), not polled: an idle standalone's
supervisor does not wake until a child dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from server.processes import wait_or_kill
from sluice.backoff import Backoff as Curve
from sluice.waits import wait_event

log = logging.getLogger("sluice.supervisor")

POLL_SECONDS = 0.2  # how often a child's liveness is checked where it cannot be awaited


@dataclass
class Backoff:
    """Delays between restarts: ``initial`` doubling up to ``cap`` (the curve of
    ``sluice.backoff``, without jitter), back to ``initial`` after a run of at least
    ``healthy_after`` seconds."""

    initial: float = 0.5
    cap: float = 10.0
    healthy_after: float = 30.0
    failures: int = field(default=0, init=False)  # restarts since the last healthy run
    _delays: Iterator[float] | None = field(default=None, init=False, repr=False)

    def next_delay(self, ran_for: float) -> float:
        """The delay before the restart of a child that ran ``ran_for`` seconds."""
        if ran_for >= self.healthy_after or self._delays is None:
            curve = Curve(initial=self.initial, multiplier=2.0, jitter=0.0, maximum=self.cap)
            self.failures, self._delays = 0, curve.nominal()
        self.failures += 1
        return next(self._delays)


def describe_exit(returncode: int) -> str:
    """``exit code 1`` or ``killed by SIGKILL``."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by {name}"
    return f"exit code {returncode}"


async def _stopped_within(stop: asyncio.Event, seconds: float) -> bool:
    """Wait up to ``seconds``; True when ``stop`` was set meanwhile."""
    await wait_event(stop, seconds)
    return stop.is_set()


async def _until_exit_or_stop(process: subprocess.Popen, stop: asyncio.Event) -> None:
    """Return when ``process`` exits or ``stop`` is set, whichever comes first.

    On Linux the wait is a process file descriptor in the event loop (``pidfd_open``): the
    loop wakes when the child exits and never in between.  Elsewhere, or when the descriptor
    cannot be had, the child is polled every ``POLL_SECONDS``."""
    try:
        pidfd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):  # not Linux 5.3+, or the child is already reaped
        await _stopped_within(stop, POLL_SECONDS)
        return
    loop = asyncio.get_running_loop()
    exited = asyncio.Event()
    try:
        loop.add_reader(pidfd, exited.set)
        stopping = asyncio.ensure_future(stop.wait())
        exiting = asyncio.ensure_future(exited.wait())
        try:
            await asyncio.wait((stopping, exiting), return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            exiting.cancel()
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)


class SupervisedProcess:
    """A child process that is started again when it dies.

    ``spawn`` starts it and returns at once (it runs in the event loop's thread, so that the
    child's parent-death signal is tied to the main thread); ``ready``, when given, blocks
    until the new child serves (it runs in a worker thread) and raises if it never does.
    """

    def __init__(
        self,
        name: str,
        spawn: Callable[[], subprocess.Popen],
        *,
        ready: Callable[[subprocess.Popen], None] | None = None,
        pid_dir: Path | None = None,
        stop_timeout: float = 20.0,
        stop_signal: int = signal.SIGTERM,
        backoff: Backoff | None = None,
    ) -> None:
        self.name = name
        self._spawn = spawn
        self._ready = ready
        self.pid_file = pid_dir / f"{name}.pid" if pid_dir is not None else None
        self.stop_timeout = stop_timeout
        self.stop_signal = stop_signal
        self.backoff = backoff or Backoff()
        self.process: subprocess.Popen | None = None
        self._group_leader = False
        self.restarts = 0

    def start(self, *, wait: bool = True) -> SupervisedProcess:
        """Start the child and, with ``wait``, wait until it is ready (raises when it is not;
        without ``wait`` only its restarts are waited for)."""
        process = self._launch()
        if wait and self._ready is not None:
            self._ready(process)
        return self

    def wait_ready(self) -> None:
        """Block until the current child serves (at once without a readiness check); raises
        when it never does."""
        if self._ready is not None and self.process is not None:
            self._ready(self.process)

    def _launch(self) -> subprocess.Popen:
        self.process = self._spawn()
        try:
            self._group_leader = os.getpgid(self.process.pid) == self.process.pid
        except ProcessLookupError:  # already gone: nothing of its group to reap
            self._group_leader = False
        if self.pid_file is not None:
            self.pid_file.parent.mkdir(parents=True, exist_ok=True)
            self.pid_file.write_text(f"{self.process.pid}\n")
        return self.process

    async def supervise(self, stop: asyncio.Event) -> None:
        """Restart the child whenever it dies, until ``stop`` is set."""
        started = time.monotonic()
        while not stop.is_set():
            process = self.process
            if process is not None and process.poll() is None:
                await _until_exit_or_stop(process, stop)
                continue
            if stop.is_set():
                return
            ran_for = time.monotonic() - started
            delay = self.backoff.next_delay(ran_for)
            if process is not None:
                self._reap_group()
                log.warning(
                    "%s (pid %d) died: %s after %.1f s; restarting in %.1f s",
                    self.name,
                    process.pid,
                    describe_exit(process.returncode),
                    ran_for,
                    delay,
                )
            if await _stopped_within(stop, delay):
                return
            started = time.monotonic()
            self.restarts += 1
            try:
                process = self._launch()
                if self._ready is not None:
                    await asyncio.to_thread(self._ready, process)
            except Exception as exc:
                log.error("%s: restart %d failed: %s", self.name, self.restarts, exc)
                self._kill()
                self.process = None
                continue
            log.warning("%s restarted (pid %d, restart %d)", self.name, process.pid, self.restarts)

    def stop(self) -> None:
        """Stop the child: ``stop_signal`` (SIGTERM), then SIGKILL after ``stop_timeout``
        seconds; then SIGKILL whatever the child left in its process group."""
        process = self.process
        if process is not None and process.poll() is None:
            process.send_signal(self.stop_signal)
            wait_or_kill(process, self.stop_timeout)
        self._reap_group()
        self._forget()

    def _kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._reap_group()
        self._forget()

    def _reap_group(self) -> None:
        # Every child starts a session of its own, so its process group is its pid: what it
        # started and left behind (Celery's beat process, a Spark JVM) goes with it.
        if self.process is not None and self._group_leader:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)

    def _forget(self) -> None:
        if self.pid_file is not None:
            self.pid_file.unlink(missing_ok=True)
