"""Die with the parent: a report scheduler started by ``sluice standalone`` takes its whole
process group down (Celery's worker, its beat process, a Spark JVM) once the standalone is
gone, however the standalone ended.

The parent-death signal alone is not enough: it reaches only the Celery worker, whose warm
shutdown waits for a running report, and neither its beat process nor the JVM hears of it.
The standalone names itself in ``SLUICE_PARENT_PID`` and starts the scheduler in a session
of its own; a thread of the worker watches for a new parent and then kills the group, and
when the worker exits (a stop that did not wait for a running report) it kills what is left
of its group first.  The watching thread sleeps on the parent's process file descriptor
(Linux), so it costs nothing until the parent goes.
"""

from __future__ import annotations

import atexit
import os
import select
import signal
import threading
import time

PARENT_ENV = "SLUICE_PARENT_PID"
POLL_SECONDS = 0.5


def _kill_own_group() -> None:
    if os.getpgrp() == os.getpid():  # a group of its own: everything it started goes too
        os.killpg(os.getpgrp(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def kill_rest_of_group() -> int:
    """SIGKILL every other process of this process's group, when it leads one; how many.

    Run at the scheduler's exit: a Spark JVM still starting when a report was cut short (its
    Python side gone, so ``reports.session`` cannot reach it) would otherwise outlive it."""
    group, me = os.getpgrp(), os.getpid()
    if group != me:
        return 0
    killed = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            if int(fields[2]) == group:
                os.kill(int(entry), signal.SIGKILL)
                killed += 1
        except (OSError, ValueError, IndexError):
            continue
    return killed


def _until_parent_gone(parent: int, poll: float) -> None:
    """Block until ``parent`` is no longer this process's parent: asleep on a process file
    descriptor where Linux has one (woken only by the parent's exit), else polling."""
    try:
        pidfd = os.pidfd_open(parent)
    except (AttributeError, OSError):  # not Linux 5.3+, or the parent is gone already
        pidfd = None
    try:
        if pidfd is not None and os.getppid() == parent:  # the descriptor is our parent's
            select.select([pidfd], [], [])
        while os.getppid() == parent:  # the fallback; or a parent not quite gone yet
            time.sleep(poll)
    finally:
        if pidfd is not None:
            os.close(pidfd)


def watch_parent(poll: float = POLL_SECONDS) -> threading.Thread | None:
    """Start the watch when ``SLUICE_PARENT_PID`` names this process's parent; None
    otherwise (a scheduler run by hand, or under another supervisor)."""
    expected = os.environ.get(PARENT_ENV, "")
    if not expected.isdigit() or int(expected) != os.getppid():
        return None
    atexit.register(kill_rest_of_group)
    parent = int(expected)

    def watch() -> None:
        _until_parent_gone(parent, poll)
        _kill_own_group()

    thread = threading.Thread(target=watch, name="parent-watch", daemon=True)
    thread.start()
    return thread
