"""``sluice api``: a service whose start-up fails says so in its exit status, as uvicorn's."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from tests import ROOT


def test_an_admin_service_that_cannot_start_exits_3():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
    # Nothing listens on port 1: the start-up's database check fails.
    env.update(
        DATABASE_URL="postgresql+psycopg://sluice:sluice@127.0.0.1:1/sluice",
        REDIS_URL="redis://127.0.0.1:1/0",
        PYTHONPATH=str(ROOT),
    )
    done = subprocess.run(
        [sys.executable, "-m", "server.cli", "api", "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 3, done.stderr.decode()[-2000:]
    assert b"Application startup failed" in done.stderr
