"""The Grafana dashboards (``helm/sluice/dashboards``): shipped by the chart and by compose's
``observability`` profile, and every query of every panel answers with data.

The live test starts a real ``sluice standalone``, puts throttled traffic through it, and
Debian's ``prometheus`` binary scraping the admin service's and the worker's ``/metrics``
every second; then it evaluates each panel's query through Prometheus's HTTP API.  A panel
whose query names a metric or label that does not exist, or whose expression is not valid
PromQL, fails here.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest

import sluice
from server.embedded_redis import free_port
from server.processes import wait_or_kill
from tests.deploy.helpers import CHART, ROOT, release, values_file
from tests.standalone_process import Standalone

DASHBOARDS = sorted((CHART / "dashboards").glob("*.json"))
METRIC = re.compile(r"\b(sluice_[a-z_]+)\b")


def queries() -> list[tuple[str, str, str]]:
    """(dashboard file, panel title, expression) of every target of every panel."""
    found = []
    for path in DASHBOARDS:
        for panel in json.loads(path.read_text())["panels"]:
            for target in panel["targets"]:
                found.append((path.name, panel["title"], target["expr"]))
    return found


def test_the_chart_ships_every_dashboard_for_grafanas_sidecar():
    assert DASHBOARDS, "no dashboard in helm/sluice/dashboards"
    values = values_file("default")
    configmap = release(values).get("ConfigMap", "sluice-grafana-dashboards")
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert set(configmap["data"]) == {path.name for path in DASHBOARDS}
    for path in DASHBOARDS:
        assert json.loads(configmap["data"][path.name]) == json.loads(path.read_text())
    off = {**values, "monitoring": {"grafanaDashboards": {"enabled": False}}}
    assert not release(off).has("ConfigMap", "sluice-grafana-dashboards")


def test_every_metric_a_dashboard_uses_is_documented():
    documented = (ROOT / "docs" / "observability.md").read_text()
    for name, title, expr in queries():
        for metric in METRIC.findall(expr):
            base = re.sub(r"_(bucket|sum|count)$", "", metric)
            assert base in documented or metric in documented, (name, title, metric)


class Traffic:
    """A producer and a consumer on a throttled topic, until stopped."""

    def __init__(self, standalone: Standalone) -> None:
        self.client = sluice.Client(standalone.redis_url)
        topic = "persistent://acme/dash/dashboards"
        self.consumer = self.client.subscribe(topic, "watched")
        self.producer = self.client.create_producer(topic)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for _ in range(20):
                self.producer.send_async(b"x", None)
            self.producer.flush()
            try:
                while True:
                    self.consumer.acknowledge(self.consumer.receive(timeout_millis=10))
            except sluice.Timeout:
                pass
            time.sleep(0.05)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.client.close()


def prometheus(folder: Path, targets: dict[str, str]) -> tuple[subprocess.Popen, str]:
    """Debian's prometheus scraping ``targets`` (job -> host:port) every second."""
    jobs = "".join(
        f"  - job_name: {job}\n    static_configs:\n      - targets: ['{target}']\n"
        for job, target in targets.items()
    )
    config = folder / "prometheus.yml"
    config.write_text(f"global:\n  scrape_interval: 1s\nscrape_configs:\n{jobs}")
    port = free_port()
    with (folder / "prometheus.log").open("wb") as log:
        process = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={config}",
                f"--storage.tsdb.path={folder / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    return process, f"http://127.0.0.1:{port}"


def query(http: httpx.Client, expr: str) -> list:
    answer = http.get("/api/v1/query", params={"query": expr}).json()
    assert answer["status"] == "success", (expr, answer)
    return answer["data"]["result"]


@pytest.mark.skipif(shutil.which("prometheus") is None, reason="prometheus is not installed")
def test_every_panel_query_returns_data_from_a_real_standalone(tmp_path):
    standalone = Standalone(tmp_path).start()
    traffic = None
    server = None
    try:
        with httpx.Client(base_url=standalone.url, timeout=30) as admin:
            tenant = {"allowedClusters": ["standalone"]}
            assert admin.put("/admin/v2/tenants/acme", json=tenant).status_code == 204
            assert admin.put("/admin/v2/namespaces/acme/dash").status_code == 204
            topic = "/admin/v2/persistent/acme/dash/dashboards"
            assert admin.put(topic).status_code == 204
            rate = {"dispatchThrottlingRateInMsg": 50, "ratePeriodInSecond": 1}
            assert admin.post(f"{topic}/dispatchRate", json=rate).status_code == 204
            group = {"dispatchRateInMsgs": 1000}
            assert admin.put("/admin/v2/resourcegroups/dash", json=group).status_code == 204
            attach = "/admin/v2/namespaces/acme/dash/resourcegroup/dash"
            assert admin.post(attach).status_code == 204
            traffic = Traffic(standalone)
            targets = {
                "sluice-api": f"127.0.0.1:{standalone.port}",
                "sluice-worker": f"127.0.0.1:{standalone.worker_port}",
            }
            server, url = prometheus(tmp_path, targets)
            with httpx.Client(base_url=url, timeout=10) as http:
                deadline = time.monotonic() + 60
                while True:
                    try:
                        up = query(http, "up == 1")
                        if {r["metric"]["job"] for r in up} == set(targets):
                            break
                    except (httpx.HTTPError, ValueError):
                        pass
                    assert time.monotonic() < deadline, (tmp_path / "prometheus.log").read_text()
                    time.sleep(0.5)
                # Admin traffic to scrape, and enough samples for rate() over them.
                for _ in range(5):
                    admin.get("/admin/v2/tenants")
                    admin.get(f"{topic}/stats")
                assert (
                    admin.post(
                        f"{topic}/dispatchRate", json=rate | {"dispatchThrottlingRateInMsg": 40}
                    ).status_code
                    == 204
                )
                time.sleep(6)
                empty = [
                    (name, title, expr) for name, title, expr in queries() if not query(http, expr)
                ]
                throttled = query(
                    http,
                    'sum(sluice_subscription_dispatch_throttled_msg_events_total{reason="topic"})',
                )
    finally:
        if traffic is not None:
            traffic.stop()
        if server is not None:
            server.terminate()
            wait_or_kill(server, 15)
        standalone.interrupt()
    assert not empty, empty
    assert float(throttled[0]["value"][1]) > 0  # the throttled counter carries its reason
