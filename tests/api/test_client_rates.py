"""Publish and subscribe rates over HTTP: Pulsar's paths and bodies, precedence and
provenance, broker settings, validation, dry runs and audit entries."""

from __future__ import annotations

import pytest

from tests.api.orders import CONFIG, NS, PERSISTENT, TOPIC

APPLIED = {"applied": "true"}


def publish(msg: int, byte: int) -> dict:
    return {"publishThrottlingRateInMsg": msg, "publishThrottlingRateInByte": byte}


def subscribe(rate: int, period: int) -> dict:
    return {"subscribeThrottlingRatePerConsumer": rate, "ratePeriodInSecond": period}


def effective(http, name: str) -> dict:
    return http.get(f"{TOPIC}/effectiveFlowControls").json()["flowControl"][name]


def test_publish_rate_precedence_and_provenance(topic):
    http = topic
    path = "publishRate"
    assert http.get(f"{NS}/{path}").json() is None
    assert http.get(f"{TOPIC}/{path}").json() is None
    assert http.get(f"{TOPIC}/{path}", params=APPLIED).json() == publish(0, 0)
    assert effective(http, path) == {"value": publish(0, 0), "source": "broker"}
    assert http.post(f"{CONFIG}/maxPublishRatePerTopicInMessages/500").status_code == 204
    assert effective(http, path) == {"value": publish(500, 0), "source": "broker"}

    assert http.post(f"{NS}/{path}", json=publish(100, -1)).status_code == 204
    assert http.get(f"{NS}/{path}").json() == publish(100, -1)
    assert http.get(f"{TOPIC}/{path}", params=APPLIED).json() == publish(100, -1)
    assert effective(http, path) == {"value": publish(100, -1), "source": "namespace"}

    assert http.post(f"{TOPIC}/{path}", json=publish(-1, 2048)).status_code == 204
    assert http.get(f"{TOPIC}/{path}").json() == publish(-1, 2048)
    assert effective(http, path) == {"value": publish(-1, 2048), "source": "topic"}
    # A topic rate that limits nothing is unset, as in Pulsar: the namespace's applies.
    assert http.post(f"{TOPIC}/{path}", json=publish(0, -1)).status_code == 204
    assert http.get(f"{TOPIC}/{path}").json() == publish(0, -1)
    assert effective(http, path) == {"value": publish(100, -1), "source": "namespace"}

    assert http.delete(f"{TOPIC}/{path}").status_code == 204
    assert http.delete(f"{NS}/{path}").status_code == 204
    assert http.get(f"{NS}/{path}").json() is None
    assert effective(http, path) == {"value": publish(500, 0), "source": "broker"}
    # Removing what is not there is not an error (as in Pulsar).
    assert http.delete(f"{NS}/{path}").status_code == 204


def test_subscribe_rate_precedence_and_provenance(topic):
    http = topic
    path = "subscribeRate"
    assert http.get(f"{NS}/{path}").json() is None
    assert http.get(f"{TOPIC}/{path}", params=APPLIED).json() == subscribe(0, 30)
    assert http.post(f"{CONFIG}/subscribeThrottlingRatePerConsumer/9").status_code == 204
    assert http.post(f"{CONFIG}/subscribeRatePeriodPerConsumerInSecond/60").status_code == 204
    assert effective(http, path) == {"value": subscribe(9, 60), "source": "broker"}
    # A missing period is Pulsar's 30 s.
    body = {"subscribeThrottlingRatePerConsumer": 3}
    assert http.post(f"{NS}/{path}", json=body).status_code == 204
    assert http.get(f"{NS}/{path}").json() == subscribe(3, 30)
    assert effective(http, path) == {"value": subscribe(3, 30), "source": "namespace"}
    assert http.post(f"{TOPIC}/{path}", json=subscribe(5, 10)).status_code == 204
    assert http.get(f"{TOPIC}/{path}", params=APPLIED).json() == subscribe(5, 10)
    assert effective(http, path) == {"value": subscribe(5, 10), "source": "topic"}
    assert http.post(f"{TOPIC}/{path}", json=subscribe(-1, 10)).status_code == 204
    assert effective(http, path) == {"value": subscribe(3, 30), "source": "namespace"}
    assert http.delete(f"{NS}/{path}").status_code == 204
    assert effective(http, path) == {"value": subscribe(9, 60), "source": "broker"}


@pytest.mark.parametrize(
    ("path", "body", "reason"),
    [
        (f"{NS}/publishRate", {"publishThrottlingRateInMsg": "10"}, "publishThrottlingRateInMsg"),
        (f"{TOPIC}/publishRate", {"publishThrottlingRateInByte": -5}, "RateInByte"),
        (f"{TOPIC}/publishRate", 100, "PublishRate body must be a JSON object"),
        (f"{NS}/subscribeRate", {"ratePeriodInSecond": 0}, "ratePeriodInSecond"),
        (
            f"{TOPIC}/subscribeRate",
            {"subscribeThrottlingRatePerConsumer": 1.5},
            "subscribeThrottlingRatePerConsumer",
        ),
    ],
)
def test_bad_bodies_are_400_and_store_nothing(topic, path, body, reason):
    http = topic
    answer = http.post(path, json=body)
    assert answer.status_code == 400
    assert reason in answer.json()["reason"]
    assert http.post(path).status_code == 400  # no body
    assert http.get(path).json() is None


def test_broker_settings_are_pulsars(topic):
    http = topic
    runtime = http.get(f"{CONFIG}/runtime").json()
    assert runtime["maxPublishRatePerTopicInMessages"] == "0"
    assert runtime["maxPublishRatePerTopicInBytes"] == "0"
    assert runtime["subscribeThrottlingRatePerConsumer"] == "0"
    assert runtime["subscribeRatePeriodPerConsumerInSecond"] == "30"
    dynamic = set(http.get(CONFIG).json())
    assert {
        "maxPublishRatePerTopicInMessages",
        "maxPublishRatePerTopicInBytes",
        "subscribeThrottlingRatePerConsumer",
        "subscribeRatePeriodPerConsumerInSecond",
    } <= dynamic
    assert http.post(f"{CONFIG}/subscribeRatePeriodPerConsumerInSecond/0").status_code == 412
    assert http.post(f"{CONFIG}/maxPublishRatePerTopicInMessages/abc").status_code == 412


def test_missing_targets_are_404(topic):
    http = topic
    assert http.post(f"{PERSISTENT}/nope/publishRate", json=publish(1, 1)).status_code == 404
    assert http.get("/admin/v2/namespaces/acme/nope/subscribeRate").status_code == 404


def test_dry_run_and_audit(topic):
    http = topic
    answer = http.post(f"{NS}/publishRate", params={"dryRun": "true"}, json=publish(7, -1))
    assert answer.status_code == 200
    body = answer.json()
    assert (body["dryRun"], body["changed"]) == (True, "acme/orders")
    [doc] = body["topics"]
    assert doc["flowControl"]["publishRate"] == {"value": publish(7, -1), "source": "namespace"}
    assert http.get(f"{NS}/publishRate").json() is None  # nothing changed
    assert http.post(f"{NS}/publishRate", json=publish(7, -1)).status_code == 204
    assert http.post(f"{NS}/publishRate", json=publish(8, -1)).status_code == 204
    assert http.post(f"{TOPIC}/subscribeRate", json=subscribe(2, 5)).status_code == 204
    assert http.delete(f"{NS}/publishRate").status_code == 204
    entries = http.get("/admin/v2/audit", params={"entityType": "namespace.publishRate"}).json()
    assert [(e["action"], e["before"], e["after"]) for e in entries] == [
        ("delete", publish(8, -1), None),
        ("update", publish(7, -1), publish(8, -1)),
        ("create", None, publish(7, -1)),
    ]
    [entry] = http.get("/admin/v2/audit", params={"entityType": "topic.subscribeRate"}).json()
    assert entry["entity"] == "persistent://acme/orders/created"
    assert entry["after"] == subscribe(2, 5)
