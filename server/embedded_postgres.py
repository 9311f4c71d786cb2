"""A throw-away PostgreSQL server: ``initdb`` and ``postgres`` under a temporary folder.

The test suite and the benchmarks start one per run, as they start their own ``redis-server``,
so they neither need nor touch a server the machine happens to run.  The server binaries come
from ``PATH`` or from Debian's and Ubuntu's ``/usr/lib/postgresql/<version>/bin`` (the newest
version there).  The server listens on 127.0.0.1 on a free port with trust authentication for
the superuser ``postgres``, skips fsync (its data is thrown away) and dies with its parent.

``initdb`` and ``postgres`` refuse to run as root: as root, the cluster's folder belongs to an
unprivileged user (``postgres``, which the server package creates, else ``nobody``) and both
run as that user.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from server.embedded_redis import die_with_parent, free_port
from server.processes import wait_or_kill

INSTALL_HINT = (
    "install PostgreSQL's server package (scripts/install-system-packages.sh does, and "
    "`make test` runs it)"
)


class PostgresNotFound(RuntimeError):
    """The PostgreSQL server binaries are not installed."""


def find_bindir() -> Path:
    """The folder holding ``initdb`` and ``postgres``: on PATH, else the newest Debian one."""
    on_path = shutil.which("initdb")
    if on_path and Path(on_path).with_name("postgres").exists():
        return Path(on_path).resolve().parent
    found = glob.glob("/usr/lib/postgresql/*/bin/initdb")

    def version(path: str) -> tuple[int, ...]:
        return tuple(int(part) for part in re.findall(r"\d+", Path(path).parent.parent.name))

    if not found:
        raise PostgresNotFound(
            f"PostgreSQL server binaries (initdb, postgres) not found: {INSTALL_HINT}"
        )
    return Path(max(found, key=version)).parent


# SIGINT is PostgreSQL's fast shutdown: it does not wait for its clients to go.
_die_with_parent = functools.partial(die_with_parent, signal.SIGINT)


def _unprivileged_user() -> pwd.struct_passwd | None:
    """The user to run the server as when we are root (None when we are not root)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise RuntimeError("running as root and neither a 'postgres' nor a 'nobody' user exists")


class EmbeddedPostgres:
    """Create, start, stop and remove a private PostgreSQL cluster."""

    superuser = "postgres"

    def __init__(self, port: int = 0, *, max_connections: int = 300) -> None:
        self.bindir = find_bindir()
        self.port = port or free_port()
        self.max_connections = max_connections
        self.directory: Path | None = None
        self.process: subprocess.Popen | None = None
        self._user = _unprivileged_user()

    @property
    def url(self) -> str:
        """SQLAlchemy URL of the ``postgres`` database (for creating scratch databases)."""
        return f"postgresql+psycopg://{self.superuser}@127.0.0.1:{self.port}/postgres"

    def _run_as(self) -> dict:
        if self._user is None:
            return {}
        return {"user": self._user.pw_uid, "group": self._user.pw_gid, "extra_groups": []}

    def start(self, timeout: float = 60.0) -> EmbeddedPostgres:
        """``initdb`` a new cluster in a temporary folder, start it, wait until it answers."""
        self.directory = Path(tempfile.mkdtemp(prefix="sluice-pg-"))
        if self._user is not None:
            os.chown(self.directory, self._user.pw_uid, self._user.pw_gid)
        data = self.directory / "data"
        init = subprocess.run(
            [
                str(self.bindir / "initdb"),
                "--pgdata",
                str(data),
                "--username",
                self.superuser,
                "--auth",
                "trust",
                "--encoding",
                "UTF8",
                "--locale",
                "C",
                "--no-sync",
            ],
            cwd=self.directory,
            capture_output=True,
            text=True,
            **self._run_as(),
        )
        if init.returncode != 0:
            self.remove()
            raise RuntimeError(f"initdb failed: {init.stderr.strip() or init.stdout.strip()}")
        log = open(self.directory / "postgres.log", "wb")  # noqa: SIM115 - the child's output
        settings = {
            "listen_addresses": "127.0.0.1",
            "port": str(self.port),
            "unix_socket_directories": str(self.directory),
            "max_connections": str(self.max_connections),
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
        }
        args = [str(self.bindir / "postgres"), "-D", str(data)]
        for key, value in settings.items():
            args += ["-c", f"{key}={value}"]
        self.process = subprocess.Popen(
            args,
            cwd=self.directory,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,
            **self._run_as(),
        )
        log.close()
        self._wait_ready(timeout)
        return self

    def _wait_ready(self, timeout: float) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            try:
                psycopg.connect(
                    host="127.0.0.1",
                    port=self.port,
                    user=self.superuser,
                    dbname="postgres",
                    connect_timeout=2,
                ).close()
                return
            except psycopg.OperationalError:
                if self.process is not None and self.process.poll() is not None:
                    message = self.log_tail()
                    self.stop()
                    raise RuntimeError(f"postgres exited: {message}") from None
                if time.monotonic() > deadline:
                    self.stop()
                    raise
                time.sleep(0.05)

    def log_tail(self, lines: int = 5) -> str:
        """The last lines of the server's log."""
        if self.directory is None:
            return ""
        with contextlib.suppress(OSError):
            text = (self.directory / "postgres.log").read_text(errors="replace")
            return " | ".join(text.strip().splitlines()[-lines:])
        return ""

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the server (fast shutdown, then SIGKILL) and remove its folder."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGINT)
            wait_or_kill(self.process, timeout)
            self.process = None
        self.remove()

    def remove(self) -> None:
        """Remove the cluster's folder."""
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    def __enter__(self) -> EmbeddedPostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
