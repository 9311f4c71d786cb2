"""Hostile input: oversized bodies, loosely typed JSON, odd names, crashes, cross-origin calls."""

from __future__ import annotations

import httpx
import pytest

from api.app import create_app
from models.settings import Settings

NS = "/admin/v2/namespaces/acme/ns"
TOPIC = "/admin/v2/persistent/acme/ns/t"


@pytest.fixture
def namespace(http):
    assert http.put("/admin/v2/tenants/acme", json={}).status_code == 204
    assert http.put(NS).status_code == 204
    return http


def test_body_size_limit(http):
    big = b'{"adminRoles": ["' + b"x" * 1_100_000 + b'"]}'
    declared = http.put(
        "/admin/v2/tenants/acme", content=big, headers={"Content-Type": "application/json"}
    )
    assert declared.status_code == 413
    assert declared.json() == {"reason": "Request body larger than 1048576 bytes"}

    def chunks():  # no Content-Length: the limit is enforced while reading
        for start in range(0, len(big), 65536):
            yield big[start : start + 65536]

    streamed = http.put(
        "/admin/v2/tenants/acme", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert streamed.status_code == 413
    assert http.get("/admin/v2/tenants").json() == []


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", f"{NS}/dispatchRate", {"dispatchThrottlingRateInMsg": 100.0}),
        ("POST", f"{NS}/dispatchRate", {"dispatchThrottlingRateInMsg": True}),
        ("POST", f"{NS}/dispatchRate", {"ratePeriodInSecond": "1"}),
        ("POST", f"{NS}/subscriptionDispatchRate", {"dispatchThrottlingRateInByte": "1024"}),
        ("PUT", f"{TOPIC}2/partitions", "3"),
        ("PUT", f"{TOPIC}2/partitions", 3.0),
        ("PUT", "/admin/v2/tenants/beta", {"adminRoles": [1]}),
        ("PUT", "/admin/v2/tenants/beta", {"allowedClusters": "standalone"}),
        ("PUT", "/admin/v2/namespaces/acme/ns2", {"replication_clusters": "standalone"}),
        ("PUT", TOPIC + "3", {"key": 1}),
    ],
)
def test_json_types_are_not_coerced(namespace, method, path, body):
    http = namespace
    answer = http.request(method, path, json=body)
    assert answer.status_code == 400, answer.text
    assert set(answer.json()) == {"reason"}
    assert http.get("/admin/v2/tenants").json() == ["acme"]
    assert http.get(f"{NS}/dispatchRate").json() is None
    assert http.get("/admin/v2/persistent/acme/ns").json() == []


@pytest.mark.parametrize(
    "path",
    [
        "/admin/v2/tenants/a'b",
        "/admin/v2/tenants/a%3B%20DROP%20TABLE%20tenants",
        "/admin/v2/namespaces/acme/x%22y",
        "/admin/v2/persistent/acme/ns/t%25",
    ],
)
def test_names_are_validated_before_any_query(namespace, path):
    answer = namespace.put(path, json={})
    assert answer.status_code == 412
    assert answer.json()["reason"].endswith("is not valid") or "invalid" in answer.text.lower()


def asgi_client(app) -> httpx.AsyncClient:
    """An in-process client (no lifespan: these calls need no database)."""
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://sluice")


async def test_unexpected_errors_show_no_trace(settings: Settings):
    app = create_app(settings)

    async def boom() -> None:
        raise RuntimeError("secret detail from deep inside")

    app.add_api_route("/boom", boom)
    async with asgi_client(app) as client:
        answer = await client.get("/boom")
    assert answer.status_code == 500
    assert answer.json() == {"reason": "Internal server error"}
    assert "secret" not in answer.text


async def test_cors_is_off_unless_origins_are_configured(settings: Settings):
    preflight = {"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}
    async with asgi_client(create_app(settings)) as closed:
        answer = await closed.options("/admin/v2/tenants/acme", headers=preflight)
        assert "access-control-allow-origin" not in answer.headers
        plain = await closed.get(
            "/admin/v2/brokers/health", headers={"Origin": "https://x.example"}
        )
        assert "access-control-allow-origin" not in plain.headers

    open_app = create_app(settings.model_copy(update={"cors_origins": "https://ui.example"}))
    async with asgi_client(open_app) as opened:
        allowed = {**preflight, "Origin": "https://ui.example"}
        answer = await opened.options("/admin/v2/tenants/acme", headers=allowed)
        assert answer.headers["access-control-allow-origin"] == "https://ui.example"
        refused = await opened.options("/admin/v2/tenants/acme", headers=preflight)
        assert "access-control-allow-origin" not in refused.headers


@pytest.mark.parametrize("path", [f"{NS}/backlogQuota", f"{TOPIC}/backlogQuota"])
def test_an_unknown_enum_value_names_the_allowed_ones(namespace, path):
    http = namespace
    assert http.put(TOPIC).status_code == 204
    body = {"limitSize": 1024, "policy": "producer_excepton"}
    answer = http.post(path, json=body)
    assert answer.status_code == 400, answer.text
    assert answer.json() == {
        "reason": "Invalid request: policy: 'producer_excepton' is not one of "
        "producer_request_hold, producer_exception, consumer_backlog_eviction, "
        "lowest_priority_eviction"
    }
    assert http.get(f"{NS}/backlogQuotaMap").json() == {}
