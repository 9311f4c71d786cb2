"""``sluice worker``: its flags, a busy HTTP port, and two workers with defaults on one host.

The workers are real processes (``python -m server.cli worker``) on the session's database
and Redis; what they do is read through the admin API (``/admin/v2/brokers/...``) and their
own HTTP endpoint.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from server.processes import wait_or_kill
from tests import ROOT
from tests.workers.conftest import wait_until

BROKERS = "/admin/v2/brokers/standalone"


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("0.0.0.0", 0))
        sock.listen()
        yield sock.getsockname()[1]


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a worker started with defaults: no Sluice variable set."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("SLUICE_") and k not in ("DATABASE_URL", "REDIS_URL")
    }
    env["SLUICE_WORKER_LEASE_TTL_SECONDS"] = "1.5"
    env.update(extra)
    return env


class Workers:
    """``sluice worker`` processes started by a test, stopped with SIGTERM at its end."""

    def __init__(self, settings, tmp_path: Path) -> None:
        self.connect = ["--redis-url", settings.redis_url, "--database-url", settings.database_url]
        self.tmp = tmp_path
        self.processes: list[tuple[subprocess.Popen, Path]] = []

    def start(self, *flags: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        log = self.tmp / f"worker-{len(self.processes)}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "server.cli", "worker", *self.connect, *flags],
                cwd=self.tmp,
                env=env or clean_env(),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.processes.append((process, log))
        return process

    def log(self, process: subprocess.Popen) -> str:
        return next(log for p, log in self.processes if p is process).read_text(errors="replace")

    def stop_all(self) -> None:
        for process, _ in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process, _ in self.processes:
            wait_or_kill(process, 20)


@pytest.fixture
def workers(http, settings, tmp_path) -> Iterator[Workers]:
    started = Workers(settings, tmp_path)
    yield started
    started.stop_all()


def live(http: httpx.Client) -> dict[str, dict]:
    return {w["id"]: w for w in http.get(f"{BROKERS}/workers").json()}


def healthz(http_url: str) -> str:
    port = urlsplit(http_url).port
    return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).text


def test_flags_choose_the_id_the_port_and_the_log_level(http, workers):
    process = workers.start("--id", "cli-worker", "--http-port", "0", "--log-level", "warning")
    wait_until(lambda: "cli-worker" in http.get(BROKERS).json(), timeout=30, every=0.1)
    url = live(http)["cli-worker"]["httpUrl"]
    port = urlsplit(url).port
    assert port and port != 8081
    assert healthz(url) == "ok"
    process.send_signal(signal.SIGTERM)
    assert process.wait(20) == 0
    # --log-level warning: the INFO lines of a start and a stop are not printed.
    assert " INFO " not in workers.log(process)


def test_two_workers_with_defaults_both_join(http, workers):
    first = workers.start()
    first_id = f"{socket.gethostname()}-{first.pid}"
    wait_until(lambda: first_id in http.get(BROKERS).json(), timeout=30, every=0.1)
    second = workers.start()
    second_id = f"{socket.gethostname()}-{second.pid}"
    wait_until(lambda: second_id in http.get(BROKERS).json(), timeout=30, every=0.1)
    assert {first_id, second_id} <= set(http.get(BROKERS).json())
    fleet = live(http)
    urls = {fleet[first_id]["httpUrl"], fleet[second_id]["httpUrl"]}
    assert len({urlsplit(u).port for u in urls}) == 2
    assert all(healthz(u) == "ok" for u in urls)
    # The default port was taken (by the first worker, or by something else on this host):
    # the second says which port it took instead.
    second_port = urlsplit(fleet[second_id]["httpUrl"]).port
    assert "port 8081 (worker HTTP) is in use" in workers.log(second)
    assert f"on port {second_port} instead" in workers.log(second)
    assert first.poll() is None and second.poll() is None


def busy_message(port: int, option: str) -> str:
    return (
        f"sluice: port {port} (worker HTTP) is already in use: stop what listens there, "
        f"or choose another port with {option}"
    )


def test_a_busy_port_asked_for_is_one_line_and_exit_code_1(settings, busy_port, tmp_path):
    connect = ["--redis-url", settings.redis_url, "--database-url", settings.database_url]
    done = subprocess.run(
        [sys.executable, "-m", "server.cli", "worker", *connect, "--http-port", str(busy_port)],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr == busy_message(busy_port, "--http-port (0 = any free port)") + "\n"

    # The same port set in the environment is asked for as exactly.
    done = subprocess.run(
        [sys.executable, "-m", "server.cli", "worker", *connect],
        cwd=tmp_path,
        env=clean_env(SLUICE_WORKER_HTTP_PORT=str(busy_port)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr == (busy_message(busy_port, "--http-port or SLUICE_WORKER_HTTP_PORT") + "\n")


def test_without_the_server_extra_one_line_says_what_to_install():
    # A missing library is what an interpreter without the extra sees; None in sys.modules
    # makes its import fail the same way.
    code = (
        "import sys\n"
        "sys.modules['fastapi'] = None\n"
        "from server.cli import main\n"
        "sys.exit(main(['standalone']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert done.stderr == (
        "sluice: the server is not installed (no module 'fastapi'): "
        "pip install 'sluice-dispatch[server]'\n"
    )
