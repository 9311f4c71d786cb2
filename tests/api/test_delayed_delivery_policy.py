"""The ``delayedDelivery`` policy over HTTP: Pulsar's ``DelayedDeliveryPolicies`` at namespace
and topic level, its checks, and ``applied=true`` resolving topic > namespace > broker."""

from __future__ import annotations

import pytest

from tests.api.orders import CONFIG, NS, TOPIC, assert_namespace_dry_run


def policy(active=True, tick=1000, max_delay=0) -> dict:
    return {"tickTime": tick, "active": active, "maxDeliveryDelayInMillis": max_delay}


@pytest.mark.parametrize("base", [NS, TOPIC])
def test_round_trip_and_removal(topic, base):
    path = f"{base}/delayedDelivery"
    assert topic.get(path).status_code == 200
    assert topic.get(path).json() is None
    answer = topic.post(path, json=policy(tick=2000, max_delay=60_000))
    assert answer.status_code == 204, answer.text
    assert topic.get(path).json() == policy(tick=2000, max_delay=60_000)
    # Missing fields are Pulsar's zeros: inactive, tick 0, no max delay.
    assert topic.post(path, json={"tickTime": 500}).status_code == 204
    assert topic.get(path).json() == policy(active=False, tick=500)
    assert topic.delete(path).status_code == 204
    assert topic.get(path).json() is None
    assert topic.delete(path).status_code == 204  # removing what is not there: no error


def test_the_namespace_policies_document_carries_it(topic):
    assert topic.get(NS).json()["delayed_delivery_policies"] is None
    assert topic.post(f"{NS}/delayedDelivery", json=policy(active=False)).status_code == 204
    assert topic.get(NS).json()["delayed_delivery_policies"] == policy(active=False)
    # A namespace is created without it: set through its own endpoint.
    answer = topic.put(
        "/admin/v2/namespaces/acme/other", json={"delayed_delivery_policies": policy()}
    )
    assert answer.status_code == 400
    assert "delayedDelivery" in answer.json()["reason"]


@pytest.mark.parametrize(
    "body, reason",
    [
        ({}, "at least one of"),
        ({"active": "true"}, "active"),
        ({"active": 1}, "active"),
        ({"tickTime": -1}, "tickTime"),
        ({"tickTime": 1.5}, "tickTime"),
        ({"maxDeliveryDelayInMillis": -1}, "maxDeliveryDelayInMillis"),
        ({"active": True, "maxDelay": 5}, "maxDelay"),
        ([1, 2], "object"),
        (3, "object"),
    ],
)
@pytest.mark.parametrize("base", [NS, TOPIC])
def test_bad_bodies_are_400_and_change_nothing(topic, base, body, reason):
    path = f"{base}/delayedDelivery"
    answer = topic.post(path, json=body)
    assert answer.status_code == 400, answer.text
    assert reason in answer.json()["reason"]
    assert topic.get(path).json() is None


def test_missing_targets_are_404(topic):
    answer = topic.post("/admin/v2/namespaces/acme/nothing/delayedDelivery", json=policy())
    assert answer.status_code == 404
    assert "reason" in answer.json()
    answer = topic.get("/admin/v2/persistent/acme/orders/nothing/delayedDelivery")
    assert answer.status_code == 404


def test_applied_resolves_topic_over_namespace_over_broker(topic):
    path = f"{TOPIC}/delayedDelivery"
    applied = {"applied": "true"}
    assert topic.get(path, params=applied).json() == policy()  # the broker's defaults
    assert topic.post(f"{CONFIG}/delayedDeliveryTickTimeMillis/250").status_code == 204
    assert topic.post(f"{CONFIG}/delayedDeliveryMaxDelayInMillis/9000").status_code == 204
    try:
        assert topic.get(path, params=applied).json() == policy(tick=250, max_delay=9000)
        effective = topic.get(f"{TOPIC}/effectiveFlowControls").json()["flowControl"]
        assert effective["delayedDelivery"] == {
            "value": policy(tick=250, max_delay=9000),
            "source": "broker",
        }
        ns_value = policy(active=False, tick=100)
        assert topic.post(f"{NS}/delayedDelivery", json=ns_value).status_code == 204
        assert topic.get(path, params=applied).json() == ns_value
        assert topic.get(path).json() is None  # not applied: the topic's own, none
        topic_value = policy(tick=10, max_delay=5)
        assert topic.post(path, json=topic_value).status_code == 204
        assert topic.get(path, params=applied).json() == topic_value
        effective = topic.get(f"{TOPIC}/effectiveFlowControls").json()["flowControl"]
        assert effective["delayedDelivery"]["source"] == "topic"
        assert topic.delete(path).status_code == 204
        assert topic.get(path, params=applied).json() == ns_value
    finally:
        topic.delete(f"{CONFIG}/delayedDeliveryTickTimeMillis")
        topic.delete(f"{CONFIG}/delayedDeliveryMaxDelayInMillis")


def test_a_dry_run_reports_and_stores_nothing(topic):
    assert_namespace_dry_run(topic, "delayedDelivery", policy(active=False, tick=5))
