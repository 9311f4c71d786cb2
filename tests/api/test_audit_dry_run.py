"""Beyond Pulsar: the audit log, dry runs and provenance of effective limits."""

from __future__ import annotations

import pytest

from tests.api.orders import NS, TOPIC, create_topic
from tests.bodies import dispatch_rate as rate


@pytest.fixture
def topic(http):
    create_topic(http)
    assert http.put(f"{TOPIC}/subscription/audit").status_code == 204
    assert http.put("/admin/v2/persistent/acme/orders/other").status_code == 204
    return http


def test_audit_records_before_after_and_request_id(topic):
    http = topic
    answer = http.post(f"{NS}/dispatchRate", json=rate(10), headers={"X-Request-Id": "req-1"})
    assert answer.headers["x-request-id"] == "req-1"
    http.post(f"{NS}/dispatchRate", json=rate(20))
    http.delete(f"{NS}/dispatchRate")
    entries = http.get(
        "/admin/v2/audit", params={"entity": "acme/orders", "entityType": "namespace.dispatchRate"}
    ).json()
    assert [e["action"] for e in entries] == ["delete", "update", "create"]
    delete, update, create = entries
    assert create["requestId"] == "req-1"
    assert (create["before"], create["after"]) == (None, rate(10))
    assert (update["before"], update["after"]) == (rate(10), rate(20))
    assert (delete["before"], delete["after"]) == (rate(20), None)
    assert all(e["role"] == "anonymous" for e in entries)


def test_audit_filters(topic):
    http = topic
    http.post(f"{TOPIC}/audit/dispatchRate", json=rate(5))
    by_prefix = http.get(
        "/admin/v2/audit", params={"entityPrefix": "persistent://acme/orders/created"}
    ).json()
    assert {e["entityType"] for e in by_prefix} == {
        "topic",
        "subscription",
        "subscription.dispatchRate",
    }
    newest = by_prefix[0]
    since = http.get("/admin/v2/audit", params={"since": newest["at"]}).json()
    assert [e["id"] for e in since] == [newest["id"]]
    assert (
        http.get("/admin/v2/audit", params={"until": newest["at"], "limit": 1}).json()[0]["id"]
        < newest["id"]
    )
    assert http.get("/admin/v2/audit", params={"limit": 0}).status_code == 400


def test_dry_run_reports_and_changes_nothing(topic):
    http = topic
    before_audit = len(http.get("/admin/v2/audit").json())
    answer = http.post(f"{NS}/dispatchRate", params={"dryRun": "true"}, json=rate(100))
    assert answer.status_code == 200
    report = answer.json()
    assert report["dryRun"] is True
    names = [t["topic"] for t in report["topics"]]
    assert names == ["persistent://acme/orders/created", "persistent://acme/orders/other"]
    created = report["topics"][0]
    assert created["effective"]["msgPerSecond"] == 100
    assert created["limiters"]["topic"]["source"] == "namespace"
    assert created["subscriptions"]["audit"]["effective"]["msgPerSecond"] == 100
    # Nothing stored, nothing audited.
    assert http.get(f"{NS}/dispatchRate").json() is None
    assert len(http.get("/admin/v2/audit").json()) == before_audit


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", f"{TOPIC}/dispatchRate", rate(3)),
        ("POST", f"{TOPIC}/subscriptionDispatchRate", rate(3)),
        ("POST", f"{TOPIC}/audit/dispatchRate", rate(3)),
        ("DELETE", f"{NS}/subscriptionDispatchRate", None),
        ("POST", "/admin/v2/brokers/configuration/dispatchThrottlingRateInMsg/3", None),
        ("DELETE", "/admin/v2/brokers/configuration/dispatchThrottlingRateInMsg", None),
    ],
)
def test_every_policy_write_supports_dry_run(topic, method, path, body):
    http = topic
    answer = http.request(method, path, params={"dryRun": "True"}, json=body)
    assert answer.status_code == 200
    assert answer.json()["dryRun"] is True
    assert http.get(f"{TOPIC}/dispatchRate").json() is None
    assert http.get(f"{TOPIC}/audit/dispatchRate").json() is None
    assert http.get("/admin/v2/brokers/configuration/values").json() == {}


def test_dry_run_still_validates(topic):
    answer = topic.post(
        f"{NS}/dispatchRate", params={"dryRun": "true"}, json={"ratePeriodInSecond": 0}
    )
    assert answer.status_code == 400


def test_provenance(topic):
    http = topic
    http.post("/admin/v2/brokers/configuration/dispatchThrottlingRateInByte/1000")
    http.post(f"{NS}/dispatchRate", json=rate(500))
    http.post(f"{TOPIC}/dispatchRate", json=rate(0, 0))  # unset: falls through
    http.post(f"{NS}/subscriptionDispatchRate", json=rate(50, period=2))
    http.post(f"{TOPIC}/vip/dispatchRate", json=rate(1000))
    doc = http.get(f"{TOPIC}/effectiveDispatchRates").json()
    assert doc["topic"] == "persistent://acme/orders/created"
    assert doc["partitions"] == 2
    topic_limiter = doc["limiters"]["topic"]
    assert topic_limiter["source"] == "namespace"
    assert [(lv["level"], lv["set"]) for lv in topic_limiter["levels"]] == [
        ("topic", False),
        ("namespace", True),
        ("broker", True),
    ]
    assert topic_limiter["levels"][0]["value"] == rate(0, 0)
    assert doc["effective"] == {
        "msgPerSecond": 500.0,
        "bytePerSecond": 1000.0,
        "msgLimiter": "topic",
        "byteLimiter": "broker",
    }
    assert set(doc["subscriptions"]) == {"audit", "vip"}
    audit = doc["subscriptions"]["audit"]
    assert audit["subscription"]["source"] == "namespace"
    assert audit["effective"]["msgPerSecond"] == 25.0
    assert audit["effective"]["msgLimiter"] == "subscription"
    vip = doc["subscriptions"]["vip"]
    assert vip["subscription"]["source"] == "subscription"
    assert vip["effective"]["msgPerSecond"] == 500.0
    assert vip["effective"]["msgLimiter"] == "topic"
    assert (
        http.get("/admin/v2/persistent/acme/orders/nope/effectiveDispatchRates").status_code == 404
    )
