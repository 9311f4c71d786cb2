"""The bash scripts under ``scripts/`` against the real admin server (and a second one)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from api.app import create_app
from migrations import upgrade
from server.embedded_redis import EmbeddedRedis
from tests import ROOT
from tests.bodies import dispatch_rate as rate
from tests.conftest import ServerThread, create_database, drop_database

SCRIPTS = ROOT / "scripts"
MISSING = [tool for tool in ("bash", "curl", "jq") if shutil.which(tool) is None]
pytestmark = pytest.mark.skipif(
    bool(MISSING), reason=f"the scripts need {', '.join(MISSING)} (apt-get install jq curl)"
)


def script(name: str, *args: str, url: str, stdin: str | None = None, token: str | None = None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
    env["SLUICE_ADMIN_URL"] = url
    if token:
        env["SLUICE_TOKEN"] = token
    return subprocess.run(
        ["bash", str(SCRIPTS / name), *args],
        input=stdin,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def url(http, admin_server) -> str:
    return admin_server.url


def test_onboard_tenant(url, http):
    result = script(
        "onboard-tenant.sh",
        "acme",
        "orders",
        "--admin-roles",
        "alice",
        "--msg-rate",
        "500",
        "--sub-msg-rate",
        "50",
        "--sub-byte-rate",
        "4096",
        url=url,
    )
    assert result.returncode == 0, result.stderr
    assert "tenant acme: created" in result.stdout
    assert http.get("/admin/v2/tenants/acme").json()["adminRoles"] == ["alice"]
    ns = "/admin/v2/namespaces/acme/orders"
    assert http.get(f"{ns}/dispatchRate").json() == rate(500)
    assert http.get(f"{ns}/subscriptionDispatchRate").json() == rate(50, 4096)
    # again: existing tenant and namespace are kept, rates set to the defaults
    again = script("onboard-tenant.sh", "acme", "orders", url=url)
    assert again.returncode == 0, again.stderr
    assert "tenant acme: exists, kept" in again.stdout
    assert http.get(f"{ns}/dispatchRate").json() == rate(1000)
    assert http.get(f"{ns}/subscriptionDispatchRate").json() == rate(100)


def test_onboard_tenant_errors(url):
    usage = script("onboard-tenant.sh", "acme", url=url)
    assert usage.returncode == 2 and "usage" in usage.stderr
    bad = script("onboard-tenant.sh", "bad name!", "orders", url=url)
    assert bad.returncode == 1 and "HTTP 412" in bad.stderr
    down = script("onboard-tenant.sh", "acme", "orders", url="http://127.0.0.1:9")
    assert down.returncode == 1 and "cannot reach http://127.0.0.1:9" in down.stderr


def test_set_rates_from_csv(url, http, tmp_path):
    http.put("/admin/v2/tenants/acme", json={})
    http.put("/admin/v2/namespaces/acme/orders")
    http.put("/admin/v2/persistent/acme/orders/a/partitions", json=2)
    http.put("/admin/v2/persistent/acme/orders/b")
    csv = tmp_path / "rates.csv"
    csv.write_text(
        "topic,msgRate,byteRate,period\n"
        "persistent://acme/orders/a,100,1048576,1\r\n"
        "# a comment\n"
        "\n"
        "acme/orders/b, 20 ,-1\n"
    )
    http.post("/admin/v2/persistent/acme/orders/b/dispatchRate", json=rate(20, 4096))
    dry = script("set-rates-from-csv.sh", "--dry-run", str(csv), url=url)
    assert dry.returncode == 0, dry.stderr
    # One readable line per row: the fields that change, old -> new, and the limit after.
    assert dry.stdout.splitlines() == [
        "persistent://acme/orders/a: would set msg unset -> 100, byte unset -> 1048576, "
        "period unset -> 1; then 100 msg/s, 1048576 byte/s per partition "
        "(msg limit from the topic limiter)",
        "acme/orders/b: would set byte 4096 -> unlimited; then 20 msg/s, unlimited byte/s per "
        "partition (msg limit from the topic limiter)",
    ]
    assert "dry run: 2 would be set, 0 failed, nothing changed" in dry.stderr
    assert http.get("/admin/v2/persistent/acme/orders/a/dispatchRate").json() is None
    assert http.get("/admin/v2/persistent/acme/orders/b/dispatchRate").json() == rate(20, 4096)
    result = script("set-rates-from-csv.sh", str(csv), url=url)
    assert result.returncode == 0, result.stderr
    assert "2 set, 0 failed" in result.stderr
    assert http.get("/admin/v2/persistent/acme/orders/a/dispatchRate").json() == rate(100, 1048576)
    assert http.get("/admin/v2/persistent/acme/orders/b/dispatchRate").json() == rate(20)


def test_set_rates_from_csv_reports_bad_lines(url, http):
    http.put("/admin/v2/tenants/acme", json={})
    http.put("/admin/v2/namespaces/acme/orders")
    http.put("/admin/v2/persistent/acme/orders/b")
    lines = (
        "acme/orders/b,5,-1,2\nacme/orders/missing,1,1,1\nacme/orders/b,many,1\nnot-a-topic,1,1\n"
    )
    result = script("set-rates-from-csv.sh", url=url, stdin=lines)
    assert result.returncode == 1
    assert "line 2: acme/orders/missing" in result.stderr and "HTTP 404" in result.stderr
    assert "line 3: expected" in result.stderr
    assert "line 4: invalid topic name" in result.stderr
    assert "1 set, 3 failed" in result.stderr
    assert http.get("/admin/v2/persistent/acme/orders/b/dispatchRate").json() == rate(5, -1, 2)


@pytest.fixture(scope="module")
def second_cluster(settings, tmp_path_factory) -> Iterator[str]:
    """Another admin service with its own database and Redis: the target of apply."""
    database = create_database("sluice_cli_target")
    upgrade(database)
    redis = EmbeddedRedis(tmp_path_factory.mktemp("redis2"))
    redis.start()
    server = ServerThread(
        create_app(settings.model_copy(update={"database_url": database, "redis_url": redis.url}))
    ).start()
    yield server.url
    server.stop()
    redis.stop()
    drop_database(database)


def populate(http) -> None:
    http.put("/admin/v2/tenants/acme", json={"adminRoles": ["ops"]})
    http.put("/admin/v2/namespaces/acme/orders")
    http.put("/admin/v2/namespaces/acme/empty")
    ns = "/admin/v2/namespaces/acme/orders"
    http.post(f"{ns}/dispatchRate", json=rate(1000))
    http.post(f"{ns}/subscriptionDispatchRate", json=rate(100, 2048, 2))
    topic = "/admin/v2/persistent/acme/orders/created"
    http.put(f"{topic}/partitions", json=3)
    http.put(f"{topic}/subscription/billing")
    http.put(f"{topic}/subscription/audit log")
    http.post(f"{topic}/dispatchRate", json=rate(300))
    http.post(f"{topic}/billing/dispatchRate", json=rate(7))
    http.put("/admin/v2/persistent/acme/orders/plain")
    http.post("/admin/v2/persistent/acme/orders/plain/subscriptionDispatchRate", json=rate(9))
    http.put("/admin/v2/tenants/beta", json={})
    http.post("/admin/v2/brokers/configuration/dispatchThrottlingRatePerTopicInMsg/50")


def test_export_and_apply_to_another_cluster(url, http, second_cluster, tmp_path):
    populate(http)
    out = tmp_path / "policies.json"
    exported = script("export-policies.sh", str(out), url=url)
    assert exported.returncode == 0, exported.stderr
    document = json.loads(out.read_text())
    assert document["brokerConfig"] == {"dispatchThrottlingRatePerTopicInMsg": "50"}
    [acme] = [t for t in document["tenants"] if t["name"] == "acme"]
    orders = next(ns for ns in acme["namespaces"] if ns["name"] == "acme/orders")
    topics = {t["name"]: t for t in orders["topics"]}
    created = topics["persistent://acme/orders/created"]
    assert created["partitions"] == 3 and created["dispatchRate"] == rate(300)
    subs = {s["name"]: s["dispatchRate"] for s in created["subscriptions"]}
    assert subs == {"billing": rate(7), "audit log": None}
    assert topics["persistent://acme/orders/plain"]["partitions"] == 0

    # the target already has a conflicting rate: apply makes it match the document
    with httpx.Client(base_url=second_cluster, timeout=30) as target:
        target.put("/admin/v2/tenants/acme", json={})
        target.put("/admin/v2/namespaces/acme/orders")
        target.post("/admin/v2/namespaces/acme/orders/dispatchRate", json=rate(1))
        applied = script("apply-policies.sh", str(out), url=second_cluster)
        assert applied.returncode == 0, applied.stderr
        assert target.get("/admin/v2/tenants/acme").json()["adminRoles"] == ["ops"]
        assert target.get("/admin/v2/namespaces/acme/orders/dispatchRate").json() == rate(1000)
    # applying twice changes nothing; the target then exports the same document
    assert script("apply-policies.sh", url=second_cluster, stdin=out.read_text()).returncode == 0
    again = script("export-policies.sh", url=second_cluster)
    assert again.returncode == 0, again.stderr
    copy = json.loads(again.stdout)
    assert copy["tenants"] == document["tenants"]
    assert copy["brokerConfig"] == document["brokerConfig"]


def test_apply_refuses_other_documents(url):
    result = script("apply-policies.sh", url=url, stdin='{"tenants": []}')
    assert result.returncode == 1 and "not a sluice-policies/1 document" in result.stderr


def test_export_fails_cleanly_when_unreachable():
    result = script("export-policies.sh", url="http://127.0.0.1:9")
    assert result.returncode == 1
    assert result.stdout == ""
    assert "cannot reach http://127.0.0.1:9" in result.stderr


class TokenRecorder(BaseHTTPRequestHandler):
    """Answers 204 to everything, remembering each request's Authorization header."""

    seen: list[str | None] = []

    def _answer(self) -> None:
        TokenRecorder.seen.append(self.headers.get("Authorization"))
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(204)
        self.end_headers()

    do_PUT = do_POST = _answer

    def log_message(self, *args) -> None:
        pass


def test_scripts_send_the_token():
    TokenRecorder.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), TokenRecorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        result = script("onboard-tenant.sh", "acme", "orders", url=url, token="secret.jwt")
        assert result.returncode == 0, result.stderr
    finally:
        server.shutdown()
        server.server_close()
    assert TokenRecorder.seen == ["Bearer secret.jwt"] * 4
