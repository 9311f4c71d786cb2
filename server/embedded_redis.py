"""An embedded Redis server: a ``redis-server`` child process under a local folder.

Standalone mode uses it when ``REDIS_URL`` is not set; the test suite uses it for a private,
disposable server.  The child dies with its parent (``PR_SET_PDEATHSIG`` on Linux), and a
Ctrl-C in the terminal stops the parent, which stops the server last.

It can require a password (``requirepass``), or an ACL user instead of the default user, and
can serve TLS only; ``url`` then carries the credentials (URL-quoted) and the ``rediss://``
scheme with the CA file, so any redis-py ``from_url`` caller connects unchanged.
"""

from __future__ import annotations

import contextlib
import ctypes
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from urllib.parse import quote

import redis

from server.processes import wait_or_kill
from sluice.protocol.connection import connect, forget_cluster_mode

PR_SET_PDEATHSIG = 1


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """In a child before exec: receive ``sig`` (SIGTERM) when the parent (thread) dies."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, sig)


def spawn_quietly(args: list[str]) -> subprocess.Popen:
    """Start a server process, its output discarded, in a session of its own: Ctrl-C in a
    terminal reaches the owner, which stops the server after everything that uses it (the
    server still dies with its owner)."""
    return subprocess.Popen(
        args,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=die_with_parent,
        start_new_session=True,
    )


@dataclass(frozen=True)
class TlsFiles:
    """PEM files for a TLS-only server: its certificate and key, and the CA that signed it."""

    cert: Path
    key: Path
    ca: Path


@dataclass(eq=False)
class EmbeddedRedis:
    """Start, stop and restart a private ``redis-server``."""

    directory: Path
    port: int = 0  # 0: a free one
    _: KW_ONLY
    appendonly: bool = False
    password: str | None = None
    username: str | None = None
    tls: TlsFiles | None = None
    extra_args: tuple[str, ...] = ()
    acl_file: Path | None = None
    binary: str = field(init=False)
    process: subprocess.Popen | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError(
                "redis-server not found: install it (apt-get install redis-server) "
                "or point REDIS_URL at a Redis 7 server"
            )
        self.binary = binary
        self.directory = Path(self.directory)
        self.port = self.port or free_port()

    @property
    def url(self) -> str:
        """``redis://`` URL of the server."""
        auth = ""
        if self.password:
            auth = f"{quote(self.username or '', safe='')}:{quote(self.password, safe='')}@"
        if self.tls is None:
            return f"redis://{auth}127.0.0.1:{self.port}/0"
        ca = quote(str(self.tls.ca.resolve()))
        return f"rediss://{auth}127.0.0.1:{self.port}/0?ssl_cert_reqs=required&ssl_ca_certs={ca}"

    def start(self, timeout: float = 10.0) -> EmbeddedRedis:
        """Start the server and wait until it answers PING."""
        self.wait_ready(self.spawn(), timeout)
        return self

    def spawn(self) -> subprocess.Popen:
        """Start the server process, on the same port and folder every time; return at once
        (``wait_ready`` waits until it serves)."""
        forget_cluster_mode("127.0.0.1", self.port)
        self.directory.mkdir(parents=True, exist_ok=True)
        args = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.directory.resolve()),
            "--save",
            "",
            "--appendonly",
            "yes" if self.appendonly else "no",
            "--logfile",
            "redis.log",
            *self.extra_args,
        ]
        if self.acl_file is not None:
            # Users from the file (``username``/``password`` name one of them for the URL).
            args += ["--aclfile", str(self.acl_file.resolve())]
        elif self.username:
            # An ACL user with every right; the default user is switched off.
            rule = f">{self.password}" if self.password else "nopass"
            args += ["--user", self.username, "on", rule, "~*", "&*", "+@all"]
            args += ["--user", "default", "off"]
        elif self.password:
            args += ["--requirepass", self.password]
        if self.tls is not None:
            args[args.index("--port") + 1] = "0"
            args += ["--tls-port", str(self.port), "--tls-auth-clients", "no"]
            args += ["--tls-cert-file", str(self.tls.cert.resolve())]
            args += ["--tls-key-file", str(self.tls.key.resolve())]
            args += ["--tls-ca-cert-file", str(self.tls.ca.resolve())]
        self.process = spawn_quietly(args)
        return self.process

    def wait_ready(self, process: subprocess.Popen, timeout: float = 10.0) -> None:
        """Wait until the server answers PING (it has loaded its data); raise when it exits
        or does not answer for ``timeout`` seconds (while it answers that it is still loading
        its data, it is given the time it needs)."""
        client = connect(self.url, socket_timeout=1.0, socket_connect_timeout=1.0)
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    client.ping()
                    return
                except redis.BusyLoadingError:
                    deadline = time.monotonic() + timeout
                    time.sleep(0.05)
                except (redis.ConnectionError, redis.TimeoutError):
                    if process.poll() is not None:
                        raise RuntimeError(
                            f"redis-server exited with {process.returncode}; "
                            f"see {self.directory / 'redis.log'}"
                        ) from None
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.02)
        finally:
            client.close()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server (SIGTERM, then SIGKILL)."""
        if self.process is None:
            return
        self.process.terminate()
        wait_or_kill(self.process, timeout)
        self.process = None

    def kill(self) -> None:
        """Kill the server abruptly (for fault tests)."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
