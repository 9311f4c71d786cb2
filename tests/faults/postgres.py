"""A PostgreSQL server of a test's own, which the test may crash and restart.

The session's server is shared by every test of the run (and by parallel runs of xdist
workers): restarting it would break them.  ``RestartablePostgres`` starts a private one
(``server.embedded_postgres``) with one migrated database, and restarts it the way an operator
or a crash does: ``pg_ctl restart -m immediate`` (every backend killed without a checkpoint,
the next start replays the write-ahead log).

The server is configured as the embedded one always is, for speed: ``fsync`` and
``synchronous_commit`` off.  ``fsync`` does not matter here (a restart kills processes, the
operating system keeps what they wrote); ``synchronous_commit = off`` would let the restart
lose commits already answered, which is why the admin service's connections turn it back on
(``models.db``).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import subprocess

from migrations import upgrade
from models.db import create_scratch_database
from server.embedded_postgres import EmbeddedPostgres


class RestartablePostgres:
    """A private PostgreSQL server with one migrated database (``url``)."""

    def __init__(self) -> None:
        self.server = EmbeddedPostgres(max_connections=100)
        self.url = ""
        self.restarts = 0

    def start(self) -> RestartablePostgres:
        """Start the server, create and migrate the database."""
        self.server.start()
        try:
            self.url = create_scratch_database(self.server.url, "sluice_restart")
            upgrade(self.url)
        except BaseException:
            self.server.stop()
            raise
        return self

    def pg_ctl(self, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess:
        """Run ``pg_ctl`` on the server's data folder, as the user the server runs as."""
        assert self.server.directory is not None
        run_as: dict = {}
        if os.geteuid() == 0:
            owner = pwd.getpwuid(self.server.directory.stat().st_uid)
            run_as = {"user": owner.pw_uid, "group": owner.pw_gid, "extra_groups": []}
            # The first server's log was opened by us: let the restarted one append to it.
            os.chown(self.server.directory / "postgres.log", owner.pw_uid, owner.pw_gid)
        done = subprocess.run(
            [
                str(self.server.bindir / "pg_ctl"),
                "--pgdata",
                str(self.server.directory / "data"),
                "--log",
                str(self.server.directory / "postgres.log"),
                *args,
            ],
            cwd=self.server.directory,
            capture_output=True,
            text=True,
            timeout=timeout,
            **run_as,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"pg_ctl {' '.join(args)} failed: {done.stderr.strip() or done.stdout.strip()}"
                f" (log: {self.server.log_tail()})"
            )
        return done

    def restart_immediately(self) -> None:
        """``pg_ctl restart -m immediate``, returning once the server accepts connections."""
        self.restarts += 1  # counted first: a failed restart may still leave a server behind
        self.pg_ctl("restart", "--mode", "immediate", "--wait", "--timeout", "100")

    def stop(self) -> None:
        """Stop the server (restarted or not) and remove its folder."""
        if self.server.directory is not None and self.restarts:
            # The restarted server is pg_ctl's child, not ours: stop it through pg_ctl.
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                self.pg_ctl("stop", "--mode", "immediate", "--wait", timeout=60)
        self.server.stop()
