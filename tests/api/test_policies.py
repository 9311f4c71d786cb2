"""Dispatch-rate policies over HTTP at every level, with ``applied`` resolution."""

from __future__ import annotations

import itertools
import time

import pytest

from tests.api.orders import CONFIG, NS, TOPIC, create_topic
from tests.bodies import dispatch_rate as rate


@pytest.fixture
def topic(http):
    return create_topic(http, partitions=4)


def applied(http, path: str) -> dict:
    answer = http.get(path, params={"applied": "true"})
    assert answer.status_code == 200
    return answer.json()


@pytest.mark.parametrize("kind", ["dispatchRate", "subscriptionDispatchRate"])
def test_namespace_policy_round_trip(topic, kind):
    http = topic
    assert http.get(f"{NS}/{kind}").json() is None
    assert http.post(f"{NS}/{kind}", json=rate(1000)).status_code == 204
    assert http.get(f"{NS}/{kind}").json() == rate(1000)
    assert http.post(f"{NS}/{kind}", json=rate(-1, 500, 2)).status_code == 204
    assert http.get(f"{NS}/{kind}").json() == rate(-1, 500, 2)
    assert http.delete(f"{NS}/{kind}").status_code == 204
    assert http.get(f"{NS}/{kind}").json() is None
    # Removing what is not there is not an error (as in Pulsar).
    assert http.delete(f"{NS}/{kind}").status_code == 204


def test_issue_curl_session(topic):
    http = topic
    assert http.post(f"{NS}/dispatchRate", json=rate(1000)).status_code == 204
    assert applied(http, f"{TOPIC}/dispatchRate") == rate(1000)


def test_topic_rate_precedence(topic):
    http = topic
    path = f"{TOPIC}/dispatchRate"
    # Nothing set: the broker-built value with period 1 (Pulsar's applied fallback).
    assert http.get(path).json() is None
    assert applied(http, path) == rate(0, 0)
    assert http.post(f"{CONFIG}/dispatchThrottlingRatePerTopicInMsg/100").status_code == 204
    assert applied(http, path) == rate(100, 0)
    # testClusterPolicyOverrideConfiguration: NS {500, 0} wins, NS {0, 0} falls back.
    assert http.post(f"{NS}/dispatchRate", json=rate(500, 0)).status_code == 204
    assert applied(http, path) == rate(500, 0)
    assert http.post(f"{NS}/dispatchRate", json=rate(0, 0)).status_code == 204
    assert applied(http, path) == rate(100, 0)
    # testPolicyOverwrittenByNamespaceLevel: the topic beats a later namespace change...
    assert http.post(f"{NS}/dispatchRate", json=rate(200, 20000)).status_code == 204
    assert http.post(path, json=rate(100, 10000)).status_code == 204
    assert http.post(f"{NS}/dispatchRate", json=rate(300, 30000, 2)).status_code == 204
    assert applied(http, path) == rate(100, 10000)
    assert http.get(path).json() == rate(100, 10000)
    # ...and its removal falls back to the namespace.
    assert http.delete(path).status_code == 204
    assert applied(http, path) == rate(300, 30000, 2)
    # A partition reports the policy of its topic.
    assert applied(http, f"{TOPIC}-partition-2/dispatchRate") == rate(300, 30000, 2)


def test_subscription_rate_chain(topic):
    http = topic
    default = f"{TOPIC}/subscriptionDispatchRate"
    own = f"{TOPIC}/audit/dispatchRate"
    assert applied(http, default) == rate(0, 0)
    assert applied(http, own) == rate(0, 0)
    assert http.post(f"{NS}/subscriptionDispatchRate", json=rate(10, 11, 12)).status_code == 204
    assert applied(http, default) == rate(10, 11, 12)
    assert applied(http, own) == rate(10, 11, 12)
    assert http.post(default, json=rate(200, 2048)).status_code == 204
    assert applied(http, own) == rate(200, 2048)
    assert http.post(own, json=rate(5)).status_code == 204
    assert applied(http, own) == rate(5)
    assert http.get(own).json() == rate(5)
    # The topic-wide default does not change because one subscription has its own rate.
    assert applied(http, default) == rate(200, 2048)
    assert applied(http, f"{TOPIC}/billing/dispatchRate") == rate(200, 2048)
    assert http.delete(own).status_code == 204
    assert http.get(own).json() is None
    assert http.delete(default).status_code == 204
    assert applied(http, own) == rate(10, 11, 12)


def test_unset_subscription_rate_is_stored_not_dropped(topic):
    # Pulsar silently ignores this write; Sluice stores it and resolution treats it as unset.
    http = topic
    own = f"{TOPIC}/audit/dispatchRate"
    assert http.post(f"{NS}/subscriptionDispatchRate", json=rate(10)).status_code == 204
    assert http.post(own, json=rate(0, 0)).status_code == 204
    assert http.get(own).json() == rate(0, 0)
    assert applied(http, own) == rate(10)


@pytest.mark.parametrize(
    "body",
    [
        {"dispatchThrottlingRateInMsg": "100"},
        {"dispatchThrottlingRateInMsg": -5},
        {"ratePeriodInSecond": 0},
        {"relativeToPublishRate": "yes"},
        [1],
    ],
)
def test_invalid_bodies_change_nothing(topic, body):
    http = topic
    assert http.post(f"{NS}/dispatchRate", json=rate(7)).status_code == 204
    for path in (f"{NS}/dispatchRate", f"{TOPIC}/dispatchRate", f"{TOPIC}/s/dispatchRate"):
        answer = http.post(path, json=body)
        assert answer.status_code == 400, path
        assert answer.json()["reason"]
    assert http.get(f"{NS}/dispatchRate").json() == rate(7)
    assert http.get(f"{TOPIC}/dispatchRate").json() is None
    assert http.get(f"{TOPIC}/s/dispatchRate").json() is None


def test_missing_body_is_refused(topic):
    answer = topic.post(f"{NS}/dispatchRate")
    assert answer.status_code == 400
    assert topic.get(f"{NS}/dispatchRate").json() is None


def test_missing_period_means_one(topic):
    http = topic
    assert (
        http.post(f"{NS}/dispatchRate", json={"dispatchThrottlingRateInMsg": 10}).status_code == 204
    )
    assert http.get(f"{NS}/dispatchRate").json() == rate(10)


@pytest.mark.parametrize(
    "path",
    [
        "/admin/v2/namespaces/acme/nope/dispatchRate",
        "/admin/v2/namespaces/nope/orders/subscriptionDispatchRate",
        "/admin/v2/persistent/acme/orders/nope/dispatchRate",
        "/admin/v2/persistent/acme/orders/nope/subscriptionDispatchRate",
        "/admin/v2/persistent/acme/orders/nope/sub/dispatchRate",
        "/admin/v2/persistent/acme/orders/created-partition-9/dispatchRate",
    ],
)
def test_unknown_targets_are_404(topic, path):
    for method in ("GET", "POST", "DELETE"):
        answer = topic.request(method, path, json=rate(1) if method == "POST" else None)
        assert answer.status_code == 404, (method, path)
        assert answer.json()["reason"]


def test_invalid_names_are_412(topic):
    answer = topic.post("/admin/v2/namespaces/acme/bad%20ns/dispatchRate", json=rate(1))
    assert answer.status_code == 412


def test_concurrent_writes_to_a_new_policy_all_succeed(topic, admin_server):
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    def post(value: int) -> int:
        with httpx.Client(base_url=admin_server.url) as client:
            return client.post(f"{TOPIC}/dispatchRate", json=rate(value)).status_code

    with ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(post, range(1, 25)))
    assert codes == [204] * 24
    entries = topic.get("/admin/v2/audit", params={"entityType": "topic.dispatchRate"}).json()
    assert len(entries) == 24
    assert [e["action"] for e in entries].count("create") == 1
    # Every update saw exactly the value it replaced: the chain is unbroken.
    chain = list(reversed(entries))
    for previous, current in itertools.pairwise(chain):
        assert current["before"] == previous["after"]


READS = [
    f"{NS}/dispatchRate",
    f"{NS}/subscriptionDispatchRate",
    "/admin/v2/namespaces/acme/nope/dispatchRate",
    "/admin/v2/namespaces/acme/bad%20name/dispatchRate",
    f"{TOPIC}/dispatchRate",
    f"{TOPIC}/dispatchRate?applied=true",
    f"{TOPIC}-partition-3/dispatchRate?applied=true",
    f"{TOPIC}-partition-4/dispatchRate?applied=true",
    f"{TOPIC}/subscriptionDispatchRate?applied=true",
    f"{TOPIC}/subscriptionDispatchRate",
    f"{TOPIC}/vip/dispatchRate",
    f"{TOPIC}/vip/dispatchRate?applied=true",
    f"{TOPIC}/other/dispatchRate?applied=true",
    "/admin/v2/persistent/acme/orders/nope/dispatchRate?applied=true",
    "/admin/v2/persistent/acme/nope/t/dispatchRate",
    "/admin/v2/persistent/acme/orders/bad%20t/dispatchRate",
]


def test_cached_reads_answer_exactly_like_the_database(topic, admin_server):
    http = topic
    http.post(f"{CONFIG}/dispatchThrottlingRatePerSubscriptionInByte/2048")
    http.post(f"{NS}/dispatchRate", json=rate(500, 0))
    http.post(f"{NS}/subscriptionDispatchRate", json=rate(10, 11, 12))
    http.post(f"{TOPIC}/subscriptionDispatchRate", json=rate(0, 0))
    http.post(f"{TOPIC}/vip/dispatchRate", json=rate(5))
    cache = admin_server.app.state.sluice.cache
    deadline = time.monotonic() + 10
    while not cache.fresh:
        assert time.monotonic() < deadline, "cache never became fresh"
        time.sleep(0.02)
    hits = cache.hits
    from_cache = [(p, http.get(p).status_code, http.get(p).text) for p in READS]
    assert cache.hits - hits == 2 * (len(READS) - 2)  # the two 412s are refused first
    cache._pending_events = True  # as if another replica had changed something
    misses = cache.misses
    from_db = [(p, http.get(p).status_code, http.get(p).text) for p in READS]
    assert cache.misses > misses
    assert from_cache == from_db
    assert {code for _p, code, _t in from_db} == {200, 404, 412}


def test_cache_stays_fresh_while_idle(topic, admin_server):
    # A blocking read on the event stream must not outlast the client's socket timeout
    # (5 s by default): once it did, and the cache went stale for good.
    cache = admin_server.app.state.sluice.cache
    deadline = time.monotonic() + 10
    while not cache.fresh:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(6.5)
    assert cache.fresh
