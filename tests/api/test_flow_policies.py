"""Flow-control policies over HTTP: backlog quota, max unacked, message TTL at every level."""

from __future__ import annotations

import pytest

from tests.api.orders import CONFIG, NS, TOPIC, assert_namespace_dry_run


def quota(size=-1, time=-1, policy="producer_request_hold", messages=-1) -> dict:
    return {"limitSize": size, "limitTime": time, "limitMessages": messages, "policy": policy}


def shown(size=-1, time=-1, policy="producer_request_hold", messages=-1) -> dict:
    """A quota as GET shows it (Pulsar's deprecated ``limit`` repeats ``limitSize``)."""
    return {"limit": size, **quota(size, time, policy, messages)}


def test_namespace_backlog_quota_round_trip(topic):
    http = topic
    assert http.get(f"{NS}/backlogQuotaMap").json() == {}
    assert http.post(f"{NS}/backlogQuota", json=quota(size=1024)).status_code == 204
    assert http.get(f"{NS}/backlogQuotaMap").json() == {"destination_storage": shown(size=1024)}
    answer = http.post(
        f"{NS}/backlogQuota",
        params={"backlogQuotaType": "message_age"},
        json={"limitTime": 60, "policy": "producer_exception"},
    )
    assert answer.status_code == 204
    assert http.get(f"{NS}/backlogQuotaMap").json() == {
        "destination_storage": shown(size=1024),
        "message_age": shown(time=60, policy="producer_exception"),
    }
    policies = http.get(NS).json()
    assert policies["backlog_quota_map"]["destination_storage"]["limitSize"] == 1024
    assert http.delete(f"{NS}/backlogQuota").status_code == 204
    assert list(http.get(f"{NS}/backlogQuotaMap").json()) == ["message_age"]
    # Removing what is not there is not an error (as in Pulsar).
    assert http.delete(f"{NS}/backlogQuota").status_code == 204


def test_topic_backlog_quota_precedence(topic):
    http = topic
    applied = {"applied": "true"}
    default = http.get(f"{TOPIC}/backlogQuotaMap", params=applied).json()
    assert default["destination_storage"] == shown()
    assert http.post(f"{CONFIG}/backlogQuotaDefaultLimitBytes/4096").status_code == 204
    assert http.post(f"{CONFIG}/backlogQuotaDefaultRetentionPolicy/producer_exception").is_success
    answer = http.get(f"{TOPIC}/backlogQuotaMap", params=applied).json()
    assert answer["destination_storage"] == shown(size=4096, policy="producer_exception")
    http.post(f"{NS}/backlogQuota", json=quota(messages=10))
    answer = http.get(f"{TOPIC}/backlogQuotaMap", params=applied).json()
    assert answer["destination_storage"] == shown(messages=10)
    http.post(f"{TOPIC}/backlogQuota", json=quota(size=1, policy="consumer_backlog_eviction"))
    assert http.get(f"{TOPIC}/backlogQuotaMap").json() == {
        "destination_storage": shown(size=1, policy="consumer_backlog_eviction")
    }
    http.delete(f"{TOPIC}/backlogQuota")
    answer = http.get(f"{TOPIC}/backlogQuotaMap", params=applied).json()
    assert answer["destination_storage"] == shown(messages=10)
    effective = http.get(f"{TOPIC}/effectiveFlowControls").json()["flowControl"]
    assert effective["backlogQuota"]["destination_storage"]["source"] == "namespace"
    assert effective["backlogQuota"]["message_age"]["source"] == "broker"


@pytest.mark.parametrize(
    "body, status, reason",
    [
        ({"limitSize": "10", "policy": "producer_exception"}, 400, "limitSize"),
        ({"limitSize": -5, "policy": "producer_exception"}, 400, "limitSize"),
        ({"limitSize": 10, "policy": "drop_everything"}, 400, "policy"),
        ([1, 2], 400, "object"),
    ],
)
def test_backlog_quota_validation(topic, body, status, reason):
    answer = topic.post(f"{NS}/backlogQuota", json=body)
    assert answer.status_code == status
    assert reason in answer.json()["reason"]


def test_backlog_quota_type_and_missing_targets(topic):
    http = topic
    answer = http.post(
        f"{NS}/backlogQuota", params={"backlogQuotaType": "nonsense"}, json=quota(size=1)
    )
    assert answer.status_code == 412
    assert "backlogQuotaType" in answer.json()["reason"]
    assert http.post(f"{NS}/backlogQuota").status_code == 400
    missing = "/admin/v2/persistent/acme/orders/nope/backlogQuota"
    assert http.post(missing, json=quota(size=1)).status_code == 404
    assert http.get("/admin/v2/namespaces/acme/nope/backlogQuotaMap").status_code == 404


@pytest.mark.parametrize(
    "ns_path, topic_path, broker_key, broker_default",
    [
        (
            "maxUnackedMessagesPerSubscription",
            "maxUnackedMessagesOnSubscription",
            "maxUnackedMessagesPerSubscription",
            200000,
        ),
        (
            "maxUnackedMessagesPerConsumer",
            "maxUnackedMessagesOnConsumer",
            "maxUnackedMessagesPerConsumer",
            50000,
        ),
        ("messageTTL", "messageTTL", "ttlDurationDefaultInSeconds", 0),
    ],
)
def test_integer_policies_precedence(topic, ns_path, topic_path, broker_key, broker_default):
    http = topic
    applied = {"applied": "true"}
    assert http.get(f"{NS}/{ns_path}").json() is None
    assert http.get(f"{TOPIC}/{topic_path}").json() is None
    assert http.get(f"{TOPIC}/{topic_path}", params=applied).json() == broker_default
    assert http.post(f"{CONFIG}/{broker_key}/7").status_code == 204
    assert http.get(f"{TOPIC}/{topic_path}", params=applied).json() == 7
    assert http.post(f"{NS}/{ns_path}", json=20).status_code == 204
    assert http.get(f"{NS}/{ns_path}").json() == 20
    assert http.get(f"{TOPIC}/{topic_path}", params=applied).json() == 20
    # 0 at the topic level means "no limit" and wins over the namespace.
    assert http.post(f"{TOPIC}/{topic_path}", json=0).status_code == 204
    assert http.get(f"{TOPIC}/{topic_path}").json() == 0
    assert http.get(f"{TOPIC}/{topic_path}", params=applied).json() == 0
    assert http.delete(f"{TOPIC}/{topic_path}").status_code == 204
    assert http.get(f"{TOPIC}/{topic_path}", params=applied).json() == 20
    assert http.delete(f"{NS}/{ns_path}").status_code == 204
    assert http.get(f"{TOPIC}/{topic_path}", params=applied).json() == 7


@pytest.mark.parametrize(
    "path", [f"{NS}/maxUnackedMessagesPerConsumer", f"{TOPIC}/maxUnackedMessagesOnSubscription"]
)
def test_max_unacked_validation(topic, path):
    answer = topic.post(path, json=-1)
    assert answer.status_code == 412
    assert "must be 0 or more" in answer.json()["reason"]
    assert topic.post(path, json="5").status_code == 400
    assert topic.post(path, json=1.5).status_code == 400
    assert topic.post(path).status_code == 400


def test_message_ttl_query_parameter_and_validation(topic):
    http = topic
    assert http.post(f"{TOPIC}/messageTTL", params={"messageTTL": 30}).status_code == 204
    assert http.get(f"{TOPIC}/messageTTL").json() == 30
    assert http.post(f"{TOPIC}/messageTTL", json=40).status_code == 204
    assert http.get(f"{TOPIC}/messageTTL").json() == 40
    answer = http.post(f"{NS}/messageTTL", json=-3)
    assert answer.status_code == 412
    assert answer.json()["reason"] == "Invalid value for message TTL, message TTL must >= 0"
    assert http.post(f"{TOPIC}/messageTTL").status_code == 400
    http.post(f"{NS}/messageTTL", json=90)
    policies = http.get(NS).json()
    assert policies["message_ttl_in_seconds"] == 90
    assert policies["max_unacked_messages_per_subscription"] is None


def test_broker_keys_validate(topic):
    http = topic
    bad = http.post(f"{CONFIG}/backlogQuotaDefaultRetentionPolicy/drop")
    assert bad.status_code == 412
    assert http.post(f"{CONFIG}/ttlDurationDefaultInSeconds/-1").status_code == 412
    runtime = http.get(f"{CONFIG}/runtime").json()
    assert runtime["backlogQuotaDefaultLimitBytes"] == "-1"
    assert runtime["backlogQuotaDefaultRetentionPolicy"] == "producer_request_hold"
    assert runtime["ttlDurationDefaultInSeconds"] == "0"


def test_dry_run_reports_and_changes_nothing(topic):
    http = topic
    assert_namespace_dry_run(http, "messageTTL", 15)
    answer = http.post(
        f"{TOPIC}/backlogQuota", params={"dryRun": "true"}, json=quota(messages=3)
    ).json()
    storage = answer["topics"][0]["flowControl"]["backlogQuota"]["destination_storage"]
    assert storage == {"value": shown(messages=3), "source": "topic"}
    assert http.get(f"{TOPIC}/backlogQuotaMap").json() == {}
    # A dry run still validates.
    assert http.post(f"{NS}/messageTTL", params={"dryRun": "true"}, json=-1).status_code == 412
    for entity_type in ("namespace.messageTTL", "topic.backlogQuota"):
        assert http.get("/admin/v2/audit", params={"entityType": entity_type}).json() == []


def test_audit_entries(topic):
    http = topic
    http.post(f"{NS}/backlogQuota", json=quota(size=10))
    http.post(f"{NS}/backlogQuota", json=quota(size=20))
    http.delete(f"{NS}/backlogQuota")
    http.post(f"{TOPIC}/maxUnackedMessagesOnConsumer", json=5)
    entries = http.get(
        "/admin/v2/audit", params={"entity": "acme/orders", "entityType": "namespace.backlogQuota"}
    ).json()
    assert [e["action"] for e in entries] == ["delete", "update", "create"]
    delete, update, create = entries
    assert (create["before"], create["after"]) == (None, shown(size=10))
    assert (update["before"], update["after"]) == (shown(size=10), shown(size=20))
    assert (delete["before"], delete["after"]) == (shown(size=20), None)
    [topic_entry] = http.get(
        "/admin/v2/audit", params={"entityType": "topic.maxUnackedMessagesPerConsumer"}
    ).json()
    assert topic_entry["entity"] == "persistent://acme/orders/created"
    assert topic_entry["after"] == 5
