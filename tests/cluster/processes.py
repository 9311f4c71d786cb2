"""``sluice api`` on SQLite as a child process, for the Redis Cluster end-to-end tests."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from server.embedded_redis import free_port
from server.processes import wait_or_kill
from tests import ROOT


def sluice(*args: str, env: dict[str, str], log: Path) -> subprocess.Popen:
    """Start ``sluice <args>`` (the console script's module) with ``env`` added."""
    with log.open("wb") as output:
        return subprocess.Popen(
            [sys.executable, "-m", "server.cli", *args],
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=output,
            stderr=subprocess.STDOUT,
        )


class AdminProcess:
    """``sluice migrate`` then ``sluice api`` on a SQLite file, with ``REDIS_URL`` given."""

    def __init__(self, folder: Path, redis_url: str) -> None:
        self.folder = folder
        self.port = free_port()
        self.env = {
            "DATABASE_URL": f"sqlite:///{folder / 'sluice.db'}",
            "REDIS_URL": redis_url,
            "SLUICE_HTTP_PORT": str(self.port),
        }
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60) -> AdminProcess:
        """Migrate the database, start the API, wait until it is ready."""
        migrate = sluice("migrate", env=self.env, log=self.folder / "migrate.log")
        if migrate.wait(timeout) != 0:
            raise RuntimeError((self.folder / "migrate.log").read_text())
        self.process = sluice(
            "api", "--port", str(self.port), env=self.env, log=self.folder / "api.log"
        )
        deadline = time.monotonic() + timeout
        while True:
            try:
                if httpx.get(f"{self.url}/admin/v2/brokers/ready", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError((self.folder / "api.log").read_text()[-3000:])
            time.sleep(0.2)

    def stop(self) -> None:
        """Stop the API (SIGTERM, SIGKILL after 15 s)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            wait_or_kill(self.process, 15)
