"""Broker dynamic configuration, health and readiness over HTTP."""

from __future__ import annotations

from models.broker_config import DYNAMIC_KEYS

CONFIG = "/admin/v2/brokers/configuration"


def test_lists_every_dynamic_key(http):
    names = http.get(CONFIG).json()
    assert names == list(DYNAMIC_KEYS)
    for key in (
        "dispatchThrottlingRateInMsg",
        "dispatchThrottlingRatePerSubscriptionInByte",
        "dispatcherMaxReadBatchSize",
        "dispatcherMaxReadSizeBytes",
        "preciseDispatcherFlowControl",
        "dispatchThrottlingOnBatchMessageEnabled",
        "dispatchThrottlingOnNonBacklogConsumerEnabled",
    ):
        assert key in names


def test_update_values_runtime_delete(http):
    assert http.get(f"{CONFIG}/values").json() == {}
    runtime = http.get(f"{CONFIG}/runtime").json()
    assert runtime["dispatchThrottlingRateInMsg"] == "0"
    assert runtime["dispatcherMaxReadBatchSize"] == "100"
    assert http.post(f"{CONFIG}/dispatchThrottlingRateInMsg/100").status_code == 204
    assert http.post(f"{CONFIG}/dispatchThrottlingOnBatchMessageEnabled/True").status_code == 204
    assert http.get(f"{CONFIG}/values").json() == {
        "dispatchThrottlingOnBatchMessageEnabled": "true",
        "dispatchThrottlingRateInMsg": "100",
    }
    assert http.get(f"{CONFIG}/runtime").json()["dispatchThrottlingRateInMsg"] == "100"
    assert http.delete(f"{CONFIG}/dispatchThrottlingRateInMsg").status_code == 204
    assert http.get(f"{CONFIG}/runtime").json()["dispatchThrottlingRateInMsg"] == "0"
    assert http.get(f"{CONFIG}/values").json() == {
        "dispatchThrottlingOnBatchMessageEnabled": "true"
    }


def test_refusals_change_nothing(http):
    unknown = http.post(f"{CONFIG}/noSuchKey/1")
    assert unknown.status_code == 404
    static = http.post(f"{CONFIG}/dispatchThrottlingForFilteredEntriesEnabled/true")
    assert (static.status_code, static.json()["reason"]) == (
        412,
        " Can't update non-dynamic configuration",
    )
    invalid = http.post(f"{CONFIG}/dispatchThrottlingRateInMsg/abc")
    assert (invalid.status_code, invalid.json()["reason"]) == (412, " Invalid dynamic-config value")
    assert http.post(f"{CONFIG}/dispatcherMaxReadBatchSize/0").status_code == 412
    assert http.delete(f"{CONFIG}/noSuchKey").status_code == 404
    assert http.delete(f"{CONFIG}/systemTopicEnabled").status_code == 412
    assert http.get(f"{CONFIG}/values").json() == {}


def test_health_and_readiness(http):
    health = http.get("/admin/v2/brokers/health")
    assert (health.status_code, health.text) == (200, "ok")
    ready = http.get("/admin/v2/brokers/ready")
    assert ready.status_code == 200
    assert ready.json() == {"database": "ok", "redis": "ok"}


def test_clusters(http):
    assert http.get("/admin/v2/clusters").json() == ["standalone"]
    assert http.get("/admin/v2/clusters/standalone").status_code == 200
    assert http.get("/admin/v2/clusters/mars").status_code == 404


def test_unknown_path_has_a_reason(http):
    answer = http.get("/admin/v2/nothing-here")
    assert answer.status_code == 404
    assert answer.json()["reason"]
