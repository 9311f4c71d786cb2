"""``sluice standalone`` as a child process on free ports, as a user would run it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from server.embedded_redis import free_port
from tests import ROOT


def run_module(module: str, *args: str, cwd: Path, env: dict[str, str]):
    """``python -m module args`` run to its end (a minute at most), its output as text."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def wait_ready(
    url: str, deadline: float, running: Callable[[], bool] = lambda: True, pause: float = 0.2
) -> bool:
    """Poll ``url`` until it answers 200 (True), or until ``time.monotonic()`` passes
    ``deadline`` or ``running()`` turns false (False)."""
    while True:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        if not running() or time.monotonic() > deadline:
            return False
        time.sleep(pause)


class Standalone:
    """Start ``sluice standalone`` (admin, worker, embedded Redis) and wait until it is ready;
    ``env`` adds environment variables (security settings, say).  The worker is a child
    process of the standalone, serving /healthz and /readyz on ``worker_port``."""

    def __init__(
        self,
        folder: Path,
        *extra_args: str,
        env: dict[str, str] | None = None,
        own_session: bool = False,
    ) -> None:
        self.folder = folder
        self.own_session = own_session  # a process group of its own, as a service manager does
        self.env = dict(env or {})
        self.port, self.redis_port, self.worker_port = free_port(), free_port(), free_port()
        self.data = folder / "data"
        self.extra_args = extra_args
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        """The admin service's base URL."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def redis_url(self) -> str:
        """The embedded Redis (the client's service URL)."""
        return f"redis://127.0.0.1:{self.redis_port}/0"

    @property
    def worker_url(self) -> str:
        """The worker's HTTP endpoint (/healthz, /readyz, /metrics)."""
        return f"http://127.0.0.1:{self.worker_port}"

    def log(self) -> str:
        """What the standalone printed."""
        return (self.folder / "standalone.log").read_text(errors="replace")

    def start(self, timeout: float = 60) -> Standalone:
        """Start and wait until ``/admin/v2/brokers/ready`` and the worker's ``/readyz``
        answer 200."""
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
        env["SLUICE_WORKER_HTTP_PORT"] = str(self.worker_port)
        env.update(self.env)
        # A file, not a pipe: nobody reads the output until the end, and a full pipe would block.
        with open(self.folder / "standalone.log", "w+b") as output:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "server.cli",
                    "standalone",
                    "--data-dir",
                    str(self.data),
                    "--port",
                    str(self.port),
                    "--redis-port",
                    str(self.redis_port),
                    *self.extra_args,
                ],
                cwd=ROOT,
                env=env,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=self.own_session,
            )
        deadline = time.monotonic() + timeout
        process = self.process
        for url in (f"{self.url}/admin/v2/brokers/ready", f"{self.worker_url}/readyz"):
            if not wait_ready(url, deadline, lambda: process.poll() is None):
                process.kill()
                raise RuntimeError(self.log()[-3000:])
        return self

    def interrupt(self, timeout: float = 30) -> int:
        """Ctrl-C, as a user stops it; return the exit code."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout)
