"""Abuse limits over HTTP: Pulsar's paths, bare-integer bodies, reasons, precedence and
provenance, dry runs and audit entries, and ``maxTopicsPerNamespace`` on topic creation."""

from __future__ import annotations

import pytest

from tests.api.orders import CONFIG, NS, PERSISTENT, TOPIC, assert_namespace_dry_run

# (namespace path, topic path, broker key / provenance name)
COUNTS = [
    ("maxSubscriptionsPerTopic", "maxSubscriptionsPerTopic", "maxSubscriptionsPerTopic"),
    ("maxProducersPerTopic", "maxProducers", "maxProducersPerTopic"),
    ("maxConsumersPerTopic", "maxConsumers", "maxConsumersPerTopic"),
    ("maxConsumersPerSubscription", "maxConsumersPerSubscription", "maxConsumersPerSubscription"),
]


@pytest.mark.parametrize(("ns_path", "topic_path", "name"), COUNTS)
def test_count_limits_precedence_and_provenance(topic, ns_path, topic_path, name):
    http = topic
    applied = {"applied": "true"}

    def effective() -> dict:
        return http.get(f"{TOPIC}/effectiveFlowControls").json()["flowControl"][name]

    assert http.get(f"{NS}/{ns_path}").json() is None
    assert http.get(f"{TOPIC}/{topic_path}").json() is None
    assert http.get(f"{TOPIC}/{topic_path}", params=applied).json() == 0
    assert effective() == {"value": 0, "source": "broker"}
    assert http.post(f"{CONFIG}/{name}/9").status_code == 204
    assert effective() == {"value": 9, "source": "broker"}
    assert http.post(f"{NS}/{ns_path}", json=4).status_code == 204
    assert http.get(f"{NS}/{ns_path}").json() == 4
    assert http.get(f"{TOPIC}/{topic_path}", params=applied).json() == 4
    assert effective() == {"value": 4, "source": "namespace"}
    assert http.post(f"{TOPIC}/{topic_path}", json=2).status_code == 204
    assert http.get(f"{TOPIC}/{topic_path}").json() == 2
    assert effective() == {"value": 2, "source": "topic"}
    # 0 at the topic level means "no limit" and wins over the namespace.
    assert http.post(f"{TOPIC}/{topic_path}", json=0).status_code == 204
    assert effective() == {"value": 0, "source": "topic"}
    assert http.delete(f"{TOPIC}/{topic_path}").status_code == 204
    assert effective() == {"value": 4, "source": "namespace"}
    assert http.delete(f"{NS}/{ns_path}").status_code == 204
    assert http.get(f"{NS}/{ns_path}").json() is None
    assert effective() == {"value": 9, "source": "broker"}


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        (f"{NS}/maxTopicsPerNamespace", "maxTopicsPerNamespace must be 0 or more"),
        (f"{NS}/maxSubscriptionsPerTopic", "maxSubscriptionsPerTopic must be 0 or more"),
        (f"{NS}/maxProducersPerTopic", "maxProducersPerTopic must be 0 or more"),
        (f"{NS}/maxConsumersPerTopic", "maxConsumersPerTopic must be 0 or more"),
        (f"{NS}/maxConsumersPerSubscription", "maxConsumersPerSubscription must be 0 or more"),
        (f"{TOPIC}/maxSubscriptionsPerTopic", "maxSubscriptionsPerTopic must be 0 or more"),
        (f"{TOPIC}/maxProducers", "maxProducers must be 0 or more"),
        (f"{TOPIC}/maxConsumers", "maxConsumers must be 0 or more"),
        (f"{TOPIC}/maxConsumersPerSubscription", "Invalid value for maxConsumersPerSubscription"),
        (
            f"{TOPIC}/maxMessageSize",
            "topic-level maxMessageSize must be greater than or equal to 0 "
            "and must be smaller than that in the broker-level",
        ),
    ],
)
def test_validation(topic, path, reason):
    http = topic
    answer = http.post(path, json=-1)
    assert (answer.status_code, answer.json()) == (412, {"reason": reason})
    assert http.post(path, json="5").status_code == 400
    assert http.post(path, json=1.5).status_code == 400
    assert http.post(path).status_code == 400
    assert http.get(path).json() is None  # nothing was stored


def test_missing_targets_are_404(topic):
    http = topic
    missing_namespace = "/admin/v2/namespaces/acme/nope"
    assert http.post(f"{missing_namespace}/maxProducersPerTopic", json=1).status_code == 404
    assert http.post(f"{PERSISTENT}/nope/maxProducers", json=1).status_code == 404
    assert http.get(f"{PERSISTENT}/nope/maxMessageSize").status_code == 404


def test_max_message_size_is_bounded_by_the_broker(topic):
    http = topic
    path = f"{TOPIC}/maxMessageSize"

    def effective() -> dict:
        return http.get(f"{TOPIC}/effectiveFlowControls").json()["flowControl"]["maxMessageSize"]

    assert http.get(path).json() is None
    assert http.get(path, params={"applied": "true"}).json() == 5_242_880
    assert effective() == {"value": 5_242_880, "source": "broker"}
    assert http.post(path, json=5_242_881).status_code == 412
    assert http.post(path, json=1024).status_code == 204
    assert http.get(path).json() == 1024
    assert effective() == {"value": 1024, "source": "topic"}
    assert http.post(path, json=0).status_code == 204
    assert effective() == {"value": 5_242_880, "source": "broker"}
    assert http.post(f"{CONFIG}/maxMessageSize/2048").status_code == 204
    assert http.post(path, json=4096).status_code == 412
    assert effective() == {"value": 2048, "source": "broker"}
    assert http.post(f"{CONFIG}/maxMessageSize/0").status_code == 412
    assert http.get(f"{CONFIG}/runtime").json()["maxMessageSize"] == "2048"
    # Pulsar has no namespace-level maxMessageSize.
    assert http.post(f"{NS}/maxMessageSize", json=10).status_code == 404


def test_broker_keys(topic):
    http = topic
    runtime = http.get(f"{CONFIG}/runtime").json()
    for name in (
        "maxTopicsPerNamespace",
        "maxSubscriptionsPerTopic",
        "maxProducersPerTopic",
        "maxConsumersPerTopic",
        "maxConsumersPerSubscription",
    ):
        assert runtime[name] == "0"
        assert http.post(f"{CONFIG}/{name}/-1").status_code == 412
    assert runtime["maxMessageSize"] == "5242880"
    dynamic = http.get(CONFIG).json()
    assert {"maxTopicsPerNamespace", "maxProducersPerTopic", "maxMessageSize"} <= set(dynamic)


def test_dry_run_audit_and_effective_controls(topic):
    http = topic
    assert_namespace_dry_run(http, "maxProducersPerTopic", 3)
    dry_run = {"dryRun": "true"}
    assert http.post(f"{TOPIC}/maxProducers", params=dry_run, json=-2).status_code == 412
    audit = {"entityType": "namespace.maxProducersPerTopic"}
    assert http.get("/admin/v2/audit", params=audit).json() == []
    http.post(f"{NS}/maxProducersPerTopic", json=3)
    http.post(f"{NS}/maxProducersPerTopic", json=5)
    http.post(f"{TOPIC}/maxProducers", json=1)
    http.delete(f"{NS}/maxProducersPerTopic")
    entries = http.get(
        "/admin/v2/audit",
        params={"entity": "acme/orders", "entityType": "namespace.maxProducersPerTopic"},
    ).json()
    assert [(e["action"], e["before"], e["after"]) for e in entries] == [
        ("delete", 5, None),
        ("update", 3, 5),
        ("create", None, 3),
    ]
    [topic_entry] = http.get(
        "/admin/v2/audit", params={"entityType": "topic.maxProducersPerTopic"}
    ).json()
    assert (topic_entry["entity"], topic_entry["after"]) == ("persistent://acme/orders/created", 1)
    effective = http.get(f"{TOPIC}/effectiveFlowControls").json()
    assert effective["appliesPer"] == "partition"
    controls = effective["flowControl"]
    assert controls["maxProducersPerTopic"] == {"value": 1, "source": "topic"}
    assert controls["maxTopicsPerNamespace"] == {"value": 0, "source": "broker"}


def test_max_topics_per_namespace_counts_partitions(topic):
    """As Pulsar's testMaxTopicsPerNamespace: partitions 2 + 3 + 4 + one non-partitioned topic
    fill a limit of 10; another partitioned topic is refused, a removed limit falls back to
    the broker's."""
    http = topic
    assert http.get(f"{NS}/maxTopicsPerNamespace").json() is None
    assert http.post(f"{NS}/maxTopicsPerNamespace", json=10).status_code == 204
    assert http.get(f"{NS}/maxTopicsPerNamespace").json() == 10
    # "created" (2 partitions) exists already.
    assert http.put(f"{PERSISTENT}/t3/partitions", json=3).status_code == 204
    assert http.put(f"{PERSISTENT}/t4/partitions", json=4).status_code == 204
    assert http.put(f"{PERSISTENT}/single").status_code == 204
    refused = http.put(f"{PERSISTENT}/t5/partitions", json=2)
    assert refused.status_code == 412
    assert refused.json() == {"reason": "Exceed maximum number of topics in namespace."}
    refused = http.put(f"{PERSISTENT}/another")
    assert refused.status_code == 412
    assert refused.json()["reason"] == "Exceed maximum number of topics in namespace."
    assert len(http.get(PERSISTENT).json()) == 10  # nothing was created
    # A deleted topic frees its places.
    assert http.delete(f"{PERSISTENT}/single").status_code == 204
    assert http.put(f"{PERSISTENT}/another").status_code == 204
    # Removed: the broker's limit applies (11 - 10 = room for one more).
    assert http.delete(f"{NS}/maxTopicsPerNamespace").status_code == 204
    assert http.post(f"{CONFIG}/maxTopicsPerNamespace/11").status_code == 204
    assert http.put(f"{PERSISTENT}/eleventh").status_code == 204
    assert http.put(f"{PERSISTENT}/twelfth").status_code == 412
    # 0 at the namespace level: no limit, whatever the broker says.
    assert http.post(f"{NS}/maxTopicsPerNamespace", json=0).status_code == 204
    assert http.put(f"{PERSISTENT}/twelfth").status_code == 204


def test_max_subscriptions_per_topic_on_rest_create(topic):
    """Pulsar checks a subscription created over REST too; a deleted one frees its place."""
    http = topic
    assert http.post(f"{TOPIC}/maxSubscriptionsPerTopic", json=2).status_code == 204
    assert http.put(f"{TOPIC}/subscription/a").status_code == 204
    assert http.put(f"{TOPIC}/subscription/b").status_code == 204
    refused = http.put(f"{TOPIC}/subscription/c")
    assert refused.status_code == 412
    assert refused.json()["reason"] == (
        "Exceed the maximum number of subscriptions of the topic: persistent://acme/orders/created"
    )
    assert http.get(f"{TOPIC}/subscriptions").json() == ["a", "b"]
    assert http.delete(f"{TOPIC}/subscription/a").status_code == 204
    assert http.put(f"{TOPIC}/subscription/c").status_code == 204
    # The namespace's limit applies when the topic has none.
    assert http.delete(f"{TOPIC}/maxSubscriptionsPerTopic").status_code == 204
    assert http.post(f"{NS}/maxSubscriptionsPerTopic", json=3).status_code == 204
    assert http.put(f"{TOPIC}/subscription/d").status_code == 204
    assert http.put(f"{TOPIC}/subscription/e").status_code == 412
