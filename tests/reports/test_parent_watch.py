"""``reports.parent_watch``: a scheduler whose standalone is gone dies at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

# The watched child: it watches with a 10 s poll, so only a wait on the parent's exit itself
# can notice the parent's death within a second.
CHILD = """
import sys, time
from reports.parent_watch import watch_parent
assert watch_parent(poll=10.0) is not None
print("watching", flush=True)
time.sleep(60)
"""
# The parent starts the child (naming itself in SLUICE_PARENT_PID), says its pid, then sleeps.
PARENT = """
import os, subprocess, sys, time
env = {**os.environ, "SLUICE_PARENT_PID": str(os.getpid())}
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]], env=env, stdout=subprocess.PIPE)
assert child.stdout.readline() == b"watching\\n"
print(child.pid, flush=True)
time.sleep(60)
"""


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_the_watch_notices_the_parent_gone_without_waiting_for_a_poll():
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, CHILD],
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert _running(child)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        killed = time.monotonic()
        while _running(child):
            assert time.monotonic() - killed < 3, "the watched child outlived its parent"
            time.sleep(0.01)
        # Polled every 10 s, this would take up to 10 s.
        assert time.monotonic() - killed < 1.0
    finally:
        parent.kill()
        parent.wait()
        assert parent.stdout is not None
        parent.stdout.close()
