"""The roles started the way the chart starts them, as real processes on a private PostgreSQL
database and Redis, with the chart's own settings: the migration Job's command succeeds (twice,
as on install then upgrade), the probes' endpoints answer, the image's and Compose file's
health-check commands pass, and a worker stops cleanly on SIGTERM within its grace period."""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from server.embedded_redis import free_port
from tests.conftest import create_database, drop_database
from tests.deploy.helpers import FULLNAME, ROOT, release, values_file
from tests.deploy.test_compose import services as compose_services
from tests.deploy.test_dockerfile import final_stage, one

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def chart():
    return release(values_file("default"))


@pytest.fixture(scope="module")
def environ(chart, redis_server, tmp_path_factory) -> Iterator[dict[str, str]]:
    """The environment a pod gets: the chart's ConfigMap, its Secret's URLs (pointed at the
    private servers) and the token key, with the pod's paths moved into a temporary folder."""
    folder = tmp_path_factory.mktemp("pod")
    database_url = create_database("sluice_deploy")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
    env.update(chart.configmap_data())
    env.update(
        DATABASE_URL=database_url,
        REDIS_URL=redis_server.url,
        SLUICE_DATA_DIR=str(folder / "data"),
        SLUICE_LAKE_PATH=str(folder / "lake"),
        PYTHONPATH=str(ROOT),
    )
    key_file = Path(env.get("SLUICE_TOKEN_SECRET_KEY_FILE", "/none"))
    token_secret = chart.get("Secret", f"{FULLNAME}-token-keys")
    key = base64.b64decode(token_secret["data"][key_file.name])
    (folder / "keys").mkdir()
    (folder / "keys" / key_file.name).write_bytes(key)
    env["SLUICE_TOKEN_SECRET_KEY_FILE"] = str(folder / "keys" / key_file.name)
    yield env
    drop_database(database_url)


def command(args: list[str]) -> list[str]:
    """A container's args run with this checkout's code (``sluice`` -> ``python -m``)."""
    assert args[0] == "sluice"
    return [sys.executable, "-m", "server.cli", *args[1:]]


def with_port(args: list[str], port: int) -> list[str]:
    args = list(args)
    args[args.index("--port") + 1] = str(port)
    return args


def wait_for(url: str, process: subprocess.Popen, timeout: float = 30.0) -> httpx.Response:
    deadline = time.monotonic() + timeout
    while True:
        assert process.poll() is None, f"exited with {process.returncode}"
        try:
            response = httpx.get(url, timeout=2)
            if response.status_code == 200:
                return response
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, f"{url} did not answer 200"
        time.sleep(0.2)


def stop(process: subprocess.Popen, grace: float) -> tuple[int, float]:
    """SIGTERM, as the kubelet sends; the exit code and how long the exit took."""
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    try:
        code = process.wait(grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        pytest.fail(f"did not exit within {grace} s of SIGTERM")
    return code, time.monotonic() - started


def test_migration_job_command_runs_on_install_and_upgrade(chart, environ):
    args = chart.container("migration")["args"]
    for _ in range(2):
        done = subprocess.run(
            command(args), env=environ, cwd=ROOT, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def api(chart, environ) -> Iterator[tuple[subprocess.Popen, int]]:
    subprocess.run(command(["sluice", "migrate"]), env=environ, cwd=ROOT, check=True)
    port = free_port()
    args = with_port(chart.container("api")["args"], port)
    process = subprocess.Popen(command(args), env=environ, cwd=ROOT)
    try:
        wait_for(f"http://127.0.0.1:{port}/admin/v2/brokers/health", process)
        yield process, port
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(30)


def test_api_probes_answer_without_a_token(chart, api):
    _, port = api
    container = chart.container("api")
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        path = container[probe]["httpGet"]["path"]
        assert httpx.get(f"http://127.0.0.1:{port}{path}", timeout=5).status_code == 200


def test_image_and_compose_health_checks_pass_against_the_api(api):
    _, port = api
    image_check = one(final_stage(), "HEALTHCHECK").value[3]
    compose_check = compose_services()["api"]["healthcheck"]["test"][3]
    for code in (image_check, compose_check):
        code = code.replace("127.0.0.1:8080", f"127.0.0.1:{port}")
        assert f":{port}/" in code
        subprocess.run([sys.executable, "-c", code], check=True, timeout=30)


def test_api_health_check_fails_when_nothing_listens():
    code = one(final_stage(), "HEALTHCHECK").value[3]
    code = code.replace("127.0.0.1:8080", f"127.0.0.1:{free_port()}")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True).returncode != 0


def test_worker_probes_and_graceful_shutdown(chart, environ, api):
    container = chart.container("worker")
    port = free_port()
    env = dict(environ, SLUICE_WORKER_HTTP_PORT=str(port), SLUICE_WORKER_ID="sluice-worker-0")
    process = subprocess.Popen(command(container["args"]), env=env, cwd=ROOT)
    try:
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            path = container[probe]["httpGet"]["path"]
            wait_for(f"http://127.0.0.1:{port}{path}", process)
        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5)
        assert metrics.status_code == 200
        assert "# TYPE" in metrics.text
        compose_check = compose_services()["worker"]["healthcheck"]["test"][3]
        subprocess.run([sys.executable, "-c", compose_check], env=env, check=True, timeout=30)
        grace = chart.pod_spec("worker")["terminationGracePeriodSeconds"]
        code, took = stop(process, grace)
        assert code == 0
        assert took < grace
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
