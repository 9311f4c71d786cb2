"""Stopping a child process: wait a while for it to exit, then kill it; reaped either way."""

from __future__ import annotations

import subprocess


def wait_or_kill(process: subprocess.Popen, timeout: float) -> None:
    """Wait up to ``timeout`` seconds for ``process`` to exit (it was asked to), then kill
    it; it is reaped either way."""
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
