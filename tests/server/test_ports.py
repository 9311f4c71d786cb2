"""A busy port stops ``sluice standalone`` and ``sluice api`` with one clear line."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

from server.embedded_redis import free_port
from server.ports import Port, PortInUse, check_free, is_in_use
from tests.standalone_process import run_module


@pytest.fixture
def busy_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def sluice(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env["SLUICE_WORKER_HTTP_PORT"] = str(free_port())
    return run_module("server.cli", *args, cwd=tmp_path, env=env)


def test_is_in_use(busy_port):
    assert is_in_use("127.0.0.1", busy_port)
    assert is_in_use("0.0.0.0", busy_port)
    assert not is_in_use("127.0.0.1", free_port())


def test_check_free_names_the_port_and_the_option(busy_port):
    check_free(Port("127.0.0.1", 0, "off", "--x"), Port("127.0.0.1", free_port(), "ok", "--y"))
    with pytest.raises(PortInUse) as raised:
        check_free(Port("127.0.0.1", busy_port, "admin API", "--port"))
    assert str(raised.value) == (
        f"port {busy_port} (admin API) is already in use: stop what listens there, "
        "or choose another port with --port"
    )


def test_standalone_on_a_busy_admin_port(busy_port, tmp_path):
    done = sluice("standalone", "--port", str(busy_port), "--no-reports", tmp_path=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        f"sluice: port {busy_port} (admin API) is already in use: stop what listens there, "
        "or choose another port with --port"
    )
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "data").exists()


def test_standalone_on_a_busy_redis_port(busy_port, tmp_path):
    done = sluice(
        "standalone", "--port", str(free_port()), "--redis-port", str(busy_port), tmp_path=tmp_path
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        f"sluice: port {busy_port} (embedded Redis) is already in use: stop what listens there, "
        "or choose another port with --redis-port"
    )


def test_api_on_a_busy_port(busy_port, tmp_path):
    done = sluice("api", "--host", "127.0.0.1", "--port", str(busy_port), tmp_path=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"sluice: port {busy_port} (admin API) is already in use: stop what listens there, "
        "or choose another port with --port"
    )
