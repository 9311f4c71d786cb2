"""Hostile input against the real admin server over HTTP, on every route of its OpenAPI document.

For every request: never a 5xx, an answer within ``BOUND_SECONDS``, every refusal a 4xx with a
JSON ``{"reason": str}`` body and no change recorded (the audit log counts every committed
change); after each batch every stable GET answer of the world is what it was, and the service
still answers its health check.  The admin server of these tests runs in this process (a
uvicorn thread), so its memory is this process's RSS.
"""

from __future__ import annotations

import gc
import json
import os
import urllib.parse
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import flush_redis, truncate
from tests.hostile import (
    ADMIN,
    FRESH,
    Api,
    RawClient,
    World,
    check_answer,
    load_api,
    reason_of,
)

DEPTH = 20_000
HUGE_INT = 2**70
BELOW_INT64 = -(2**63) - 1

# Whole bodies that no route takes (raw bytes: some are not JSON at all).
HOSTILE_BODIES: dict[str, bytes] = {
    "deep array": b"[" * DEPTH + b"]" * DEPTH,
    "deep object": b'{"a":' * DEPTH + b"1" + b"}" * DEPTH,
    "2^70": str(HUGE_INT).encode(),
    "-2^63-1": str(BELOW_INT64).encode(),
    "4300+ digits": b"9" * 5000,
    "1e400": b"1e400",
    "-1e400": b"-1e400",
    "NaN": b"NaN",
    "Infinity": b"Infinity",
    "-Infinity": b"-Infinity",
    "float": b"1.5",
    "true": b"true",
    "string": b'"1"',
    "array": b"[1]",
    "broken": b'{"a":',
    "trailing garbage": b"{} x",
    "not UTF-8": b'"\xff\xfe"',
    "NUL in a string": b'"\\u0000"',
    "NUL in a key": b'{"\\u0000": 1}',
    "unpaired surrogate": b'"\\ud800"',
    "control character": b'"a\x01b"',
    "unknown field": b'{"unknownField": 1}',
    "typo": b'{"dispatchThrottlingRateInMsgs": 5, "limitSzie": 1, "adminRole": []}',
    "huge string": b'"' + b"x" * 900_000 + b'"',
    "many keys": json.dumps({f"k{i}": i for i in range(40_000)}).encode(),
}
# Bodies that some routes may take (an optional body, a body of defaults).
MAYBE_VALID_BODIES: dict[str, bytes] = {"empty object": b"{}", "null": b"null"}

RAW_NUMBERS = {"1e400": b"1e400", "NaN": b"NaN", "Infinity": b"Infinity"}


def wrong_values(schema: dict) -> list[object]:
    """JSON values of the wrong type (or out of range) for a field of ``schema``."""
    kind = schema.get("type")
    if "anyOf" in schema and kind is None:
        # Wrong for every alternative: no boolean or float alternative is taken anywhere, a
        # NUL is refused wherever it appears, and no tuple alternative has one item.
        return [True, 1.5, "\u0000", [None]]
    if "enum" in schema:
        return ["drop", 1, [], {}, "\u0000"]
    if kind in ("integer", "number"):
        values: list[object] = [True, "1", [], {}, HUGE_INT, BELOW_INT64, 2**63]
        if kind == "integer":
            values.append(1.5)
        low = schema.get("minimum", schema.get("exclusiveMinimum"))
        if low is not None:
            values.append(int(low) - 1)
        if "maximum" in schema and schema["maximum"] < 2**62:
            values.append(int(schema["maximum"]) + 1)
        return values
    if kind == "boolean":
        return [1, 0, "true", "false", 1.5, [], {}]
    if kind == "string":
        return [1, True, [], {}, 1.5]
    if kind == "array":
        return ["x", 1, {}, True, [1], [None], [[]], ["\u0000"]]
    if kind == "object":
        values = [1, "x", [], True]
        if isinstance(schema.get("additionalProperties"), dict):  # a map: wrong values too
            values += [{"k": v} for v in wrong_values(schema["additionalProperties"])]
        return values
    raise AssertionError(f"no wrong values for a field of schema {schema}: add them")


@pytest.fixture(scope="module")
def api(admin_server) -> Api:
    api = load_api(admin_server.url)
    # Warm up: the first chart loads the plotting library, not a cost of hostile input.
    RawClient(admin_server.url).send("GET", f"{ADMIN}/reports/charts/a/b/c?subscription=s")
    return api


@pytest.fixture(scope="module")
def built(admin_server, db, redis_server, api) -> Iterator[World]:
    """One world for the module: refused requests leave it as it is, which each test checks."""
    truncate(db)
    flush_redis(redis_server.url)
    with httpx.Client(base_url=admin_server.url, timeout=30) as client:
        world = World(client, db, api, RawClient(admin_server.url)).build()
        world.baseline = world.snapshot()
        yield world


@pytest.fixture
def world(built: World) -> Iterator[World]:
    yield built
    assert built.snapshot() == built.baseline, "a refused request changed what GET answers"
    built.healthy()


def test_the_suite_sees_the_routes(api: Api):
    assert len(api.operations) > 50
    assert len(api.body_operations) >= 15
    # The policy bodies are typed in the schema, so the per-field attacks below reach them.
    types = {op.body_type for op in api.body_operations}
    assert {"DispatchRateBody", "BacklogQuotaBody", "TenantInfo", "integer"} <= types


def test_hostile_bodies_on_every_body_route(world: World):
    for op in world.api.body_operations:
        target = op.concrete()
        for name, body in HOSTILE_BODIES.items():
            if name == "string" and op.body_type == "string":
                continue  # a name is what a string body holds (a topic's resource group)
            answer = world.refused(op.method, target, body)
            assert answer.status in (400, 413), f"{name}: {answer}"
        for body in MAYBE_VALID_BODIES.values():
            answer = world.send(op.method, target, body)
            if answer.status >= 400:
                continue
            # Accepted: only where the body is optional or all defaults; undo it.
            assert not op.body_required or body == b"{}", answer
            undo = world.http.request("DELETE", target) if op.method == "PUT" else None
            assert undo is None or undo.status_code == 204, undo.text


def test_a_body_of_many_unknown_keys_gets_a_short_reason(world: World):
    # 40,000 unknown keys once came back as a 2 MB reason, one clause per key.
    answer = world.refused(
        "POST", f"{World.TOPIC}/subscription/s/resetcursor", HOSTILE_BODIES["many keys"]
    )
    assert answer.status == 400, answer
    reason = reason_of(answer)
    assert len(answer.body) < 4096, f"{len(answer.body)} bytes"
    assert "k0: Extra inputs are not permitted" in reason, reason
    assert reason.count("; ") == 20 and reason.endswith(" more"), reason
    assert int(reason.rsplit("and ", 1)[1].split()[0]) + 20 > 40_000, reason  # every key counted


def test_every_field_of_every_body_with_every_wrong_type(world: World):
    attacked = 0
    for op in world.api.body_operations:
        target = op.concrete()
        schema = op.body or {}
        if schema.get("type") != "object" or "properties" not in schema:
            # A bare value or a map: the body itself takes the wrong values (raw non-JSON
            # numbers too); null is a missing body, refused only where one is required.
            for value in [*wrong_values(schema), None if op.body_required else "x"]:
                world.refused(op.method, target, value)
                attacked += 1
            for raw in RAW_NUMBERS.values():
                world.refused(op.method, target, raw)
            continue
        for prop, prop_schema in schema["properties"].items():
            for value in wrong_values(world.api.resolve(prop_schema)):
                world.refused(op.method, target, {prop: value})
                attacked += 1
            for raw in RAW_NUMBERS.values():
                world.refused(op.method, target, b'{"' + prop.encode() + b'": ' + raw + b"}")
    assert attacked > 200


UNKNOWN_OR_MISSING = [
    ("POST", f"{World.NS}/dispatchRate", {"unknownField": 1}, "'unknownField'"),
    ("POST", f"{World.NS}/dispatchRate", {"dispatchThrottlingRateInMsgs": 5}, "InMsgs'"),
    ("POST", f"{World.NS}/dispatchRate", {}, "must set at least one of"),
    ("POST", f"{World.NS}/dispatchRate", {"ratePeriodInSecond": None}, "at least one"),
    ("POST", f"{World.TOPIC}/s/dispatchRate", {"msg": 5}, "'msg'"),
    ("POST", f"{World.NS}/backlogQuota", {"limitSize": 5, "limitSzie": 6}, "'limitSzie'"),
    ("POST", f"{World.TOPIC}/backlogQuota", {}, "must set at least one of"),
    ("POST", f"{ADMIN}/tenants/acme", {"adminRole": ["x"]}, "'adminRole'"),
    ("PUT", f"{ADMIN}/tenants/{FRESH}", {"allowedCluster": ["standalone"]}, "'allowedCluster'"),
    ("PUT", f"{ADMIN}/namespaces/acme/{FRESH}", {"replicaton_clusters": []}, "'replicaton_"),
    ("PUT", f"{ADMIN}/namespaces/acme/{FRESH}", {"message_ttl_in_seconds": 60}, "messageTTL"),
    ("PUT", f"{ADMIN}/namespaces/acme/{FRESH}", {"bundles": {"numBundle": 4}}, "'numBundle'"),
    ("POST", f"{ADMIN}/reports/runs", {"jobs": ["rates"], "lookback": 60}, "'lookback'"),
]


def test_unknown_or_missing_fields_are_refused_and_named(world: World):
    for method, path, body, named in UNKNOWN_OR_MISSING:
        answer = world.refused(method, path, body)
        assert answer.status == 400, answer
        assert named in reason_of(answer), answer


def test_pulsar_clients_bodies_are_taken(world: World):
    """What pulsar-admin and Pulsar's Java admin client send (whole objects, defaults
    included) is not refused by the strict bodies."""
    http = world.http
    pulsar_policies = {  # a default Policies with replication_clusters, as Jackson writes it
        "auth_policies": {
            "namespace_auth": {},
            "destination_auth": {},
            "subscription_auth_roles": {},
        },
        "replication_clusters": ["standalone"],
        "allowed_clusters": [],
        "bundles": {"boundaries": ["0x00000000", "0xffffffff"], "numBundles": 1},
        "backlog_quota_map": {},
        "clusterDispatchRate": {},
        "topicDispatchRate": {},
        "subscriptionDispatchRate": {},
        "replicatorDispatchRate": {},
        "clusterSubscribeRate": {},
        "persistence": None,
        "deduplicationEnabled": None,
        "publishMaxMessageRate": {},
        "latency_stats_sample_rate": {},
        "message_ttl_in_seconds": None,
        "retention_policies": None,
        "deleted": False,
        "encryption_required": False,
        "subscription_auth_mode": "None",
        "max_unacked_messages_per_consumer": None,
        "offload_threshold": -1,
        "schema_compatibility_strategy": "UNDEFINED",
        "schema_validation_enforced": False,
        "subscription_types_enabled": [],
        "properties": {},
        "migrated": False,
    }
    assert http.put(f"{ADMIN}/namespaces/acme/pulsar", json=pulsar_policies).status_code == 204
    assert http.get(f"{ADMIN}/namespaces/acme/pulsar").json()["bundles"]["numBundles"] == 1
    assert http.delete(f"{ADMIN}/namespaces/acme/pulsar").status_code == 204
    tenant = {"adminRoles": ["ops"], "allowedClusters": ["standalone"]}
    assert http.post(f"{ADMIN}/tenants/acme", json=tenant).status_code == 204
    rate = {
        "dispatchThrottlingRateInMsg": 100,
        "dispatchThrottlingRateInByte": -1,
        "relativeToPublishRate": False,
        "ratePeriodInSecond": 1,
    }
    assert http.post(f"{World.NS}/dispatchRate", json=rate).status_code == 204
    quota = {"limit": 1000, "limitSize": 1000, "limitTime": -1, "policy": "producer_request_hold"}
    assert http.post(f"{World.NS}/backlogQuota", json=quota).status_code == 204
    # Restore what the world had, so the fixture's comparison holds.
    for path, body in (
        (f"{ADMIN}/tenants/acme", {"allowedClusters": ["standalone"]}),
        (f"{World.NS}/dispatchRate", {"dispatchThrottlingRateInMsg": 100}),
        (f"{World.NS}/backlogQuota", {"limitSize": 1000}),
    ):
        assert http.post(path, json=body).status_code == 204


QUERY_ATTACKS = {
    "integer": ["abc", "1.5", "1e400", "NaN", str(HUGE_INT), str(BELOW_INT64), "", "%00"],
    "boolean": ["maybe", "2", "", "%00", "%0A"],
    "string": ["%00", "%0A", "a%01b", "x" * 10_000],
    "date-time": ["NaN", "9" * 100, "%00", "99999-01-01"],
}


def _query_kind(schema: dict) -> str:
    schema = next((s for s in schema.get("anyOf", []) if s.get("type") != "null"), schema)
    return schema.get("format") if schema.get("format") == "date-time" else schema["type"]


def test_hostile_query_parameters_on_every_route(world: World):
    attacked = 0
    for op in world.api.operations:
        for name, schema in op.query.items():
            kind = _query_kind(schema)
            for value in QUERY_ATTACKS[kind]:
                target = f"{op.concrete()}?{name}={value}"
                body = op.valid_body if op.body is not None else None
                if op.method == "GET":
                    world.send("GET", target)
                else:  # a write with a bad parameter is refused, whatever else it carries
                    world.refused(op.method, target, body)
                attacked += 1
    assert attacked > 100


def test_huge_query_strings(world: World):
    for size in (20_000, 100_000, 1_000_000):
        for target in (f"{ADMIN}/audit", f"{World.NS}/dispatchRate", f"{ADMIN}/tenants/acme"):
            for method in ("GET", "POST", "DELETE"):
                answer = world.refused(method, f"{target}?entity={'x' * size}")
                assert answer.status in (400, 414), answer


def test_wrong_query_types_name_the_parameter(world: World):
    answer = world.send("GET", f"{ADMIN}/audit?limit=abc")
    assert answer.status == 400 and "limit" in reason_of(answer)
    answer = world.refused(
        "POST", f"{World.NS}/dispatchRate?dryRun=maybe", {"ratePeriodInSecond": 2}
    )
    assert answer.status == 400 and "dryRun" in reason_of(answer)


HOSTILE_NAMES = {
    "..": "..",
    ".": ".",
    "...": "...",
    "encoded ..": "%2E%2E",
    "newline": "a%0Ab",
    "trailing newline": "a%0A",
    "NUL": "a%00",
    "tab": "%09",
    "DEL": "a%7F",
    "C1 control": "a%C2%85",
    "not UTF-8": "a%FF",
    "10,000 characters": "x" * 10_000,
}


def test_hostile_names_on_every_route(world: World):
    for op in world.api.operations:
        for index, param in enumerate(op.path_params):
            # Control characters are refused for every parameter alike (api.routing): one per
            # route; dots alone and overlong names go through each route's own name checks.
            labels = ["..", "10,000 characters"]
            if index == len(op.path_params) - 1:
                labels.append("newline")
            for label in labels:
                target = op.concrete(**{param: HOSTILE_NAMES[label]})
                world.refused(op.method, target, op.valid_body)


CREATING_ROUTES = [
    "PUT /tenants/{name}",
    "PUT /namespaces/acme/{name}",
    "PUT /persistent/acme/ns/{name}",
    "PUT /persistent/acme/ns/{name}/partitions",
    "PUT /persistent/acme/ns/t/subscription/{name}",
    "GET /clusters/{name}",
]


def test_hostile_names_are_refused_with_412(world: World):
    for route in CREATING_ROUTES:
        method, template = route.split(" ", 1)
        body = 2 if template.endswith("partitions") else None
        for name in HOSTILE_NAMES.values():
            answer = world.refused(method, ADMIN + template.format(name=name), body)
            assert answer.status == 412, answer


def test_wrong_methods_answer_405_with_the_allowed_ones(world: World):
    paths = {op.concrete() for op in world.api.operations}
    for path in sorted(paths):
        allowed = world.api.allowed(path)
        for method in ("GET", "PUT", "POST", "DELETE", "PATCH", "OPTIONS"):
            if method in allowed:
                continue
            answer = world.refused(method, path, {} if method in ("PUT", "POST") else None)
            assert answer.status == 405, answer
            assert set(answer.headers["allow"].split(", ")) - {"HEAD"} == allowed, answer
            assert method in reason_of(answer)


def test_unknown_paths_and_trailing_slashes_are_404(world: World):
    paths = sorted({op.concrete() for op in world.api.operations})
    targets = [p + "/" for p in paths] + [
        "/",
        "/admin",
        "/admin/v2",
        "/admin/v2/",
        "/admin/v3/tenants",
        f"{ADMIN}/nope",
        f"{World.TOPIC}/s/unknown/deeper",
        f"{ADMIN}/tenants//",
    ]
    for target in targets:
        for method in ("GET", "PUT"):
            answer = world.refused(method, target, {} if method == "PUT" else None)
            assert answer.status == 404, answer
            assert "location" not in answer.headers
    reason = reason_of(world.refused("PUT", f"{ADMIN}/tenants/", {}))
    assert "trailing slash" in reason


def test_bodies_must_be_json(world: World):
    for content_type in ("text/plain", None, "application/xml", "multipart/form-data; boundary=x"):
        for op in world.api.body_operations:
            body = json.dumps(op.valid_body).encode()
            answer = world.refused(op.method, op.concrete(), body, content_type=content_type)
            assert answer.status == 415, answer


def test_json_with_parameters_is_json(world: World):
    answer = world.send(
        "POST",
        f"{World.NS}/dispatchRate?dryRun=true",
        {"dispatchThrottlingRateInMsg": 1},
        content_type="application/json; charset=utf-8",
    )
    assert answer.status == 200, answer


def test_empty_and_oversized_bodies(world: World):
    big = b'{"x": "' + b"y" * 1_100_000 + b'"}'
    for op in world.api.body_operations:
        answer = world.refused(op.method, op.concrete(), big)
        assert answer.status == 413, answer
        if op.body_required:
            answer = world.refused(op.method, op.concrete(), b"")
            assert answer.status == 400, answer


def rss_bytes() -> int:
    """Resident memory of this process, where the admin server runs."""
    with open(f"/proc/{os.getpid()}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_memory_stays_bounded_under_repeated_attacks(world: World, admin_server):
    assert admin_server.thread.is_alive()  # the server is a thread of this process
    heavy = [
        HOSTILE_BODIES["deep array"],
        HOSTILE_BODIES["deep object"],
        HOSTILE_BODIES["huge string"],
        HOSTILE_BODIES["many keys"],
        b'{"x": "' + b"y" * 1_100_000 + b'"}',
    ]
    target = f"{World.NS}/dispatchRate"
    for body in heavy:  # warm up: allocator arenas, caches
        world.refused("POST", target, body)
    gc.collect()
    before = rss_bytes()
    for _ in range(10):
        for body in heavy:
            world.refused("POST", target, body)
        world.refused("GET", f"{ADMIN}/audit?entity={'x' * 100_000}")
    gc.collect()
    grown = rss_bytes() - before
    assert grown < 32 * 2**20, f"RSS grew by {grown / 2**20:.1f} MiB"


def test_control_characters_in_parameters_never_reach_the_database(world: World):
    """A NUL cannot be stored by PostgreSQL: every route refuses it before any query."""
    for target in (
        f"{ADMIN}/audit?entity=%00",
        f"{ADMIN}/audit?role=a%00",
        f"{ADMIN}/reports/runs?job=%00",
        f"{ADMIN}/reports/rates/acme/ns?topic=%00",
        f"{ADMIN}/reports/rates/a%00/ns",
        f"{ADMIN}/clusters/a%00",
    ):
        answer = world.refused("GET", target)
        assert answer.status in (400, 412), answer
    for body in ({"adminRoles": ["\u0000"]}, {"adminRoles": ["\ud800"]}):
        raw = json.dumps(body).encode()  # json.dumps escapes both as \\u sequences
        answer = world.refused("POST", f"{ADMIN}/tenants/acme", raw)
        assert answer.status == 400, answer
    answer = world.refused("PUT", f"{World.TOPIC}2", {"key": "\u0000"})
    assert answer.status == 400


def test_reports_take_any_since_without_failing(world: World):
    # Warm up: the first chart loads the plotting library, not a cost of hostile input.
    world.http.get(f"{ADMIN}/reports/charts/acme/ns/t", params={"subscription": "s"})
    for since in ("9" * 60, "99999999999999999s", "0001-01-01", "9999-12-31", "1e400"):
        query = urllib.parse.urlencode({"since": since})
        for target in (f"{ADMIN}/reports/rates/acme/ns", f"{ADMIN}/reports/backlog/acme/ns"):
            world.send("GET", f"{target}?{query}")
    for since in ("9" * 60, "0001-01-01"):
        world.send("GET", f"{ADMIN}/reports/charts/acme/ns/t?subscription=s&since={since}")
    for subscription in ("x" * 10_000, "%00", "..", "a%FF"):  # the chart's title stays bounded
        answer = world.send("GET", f"{ADMIN}/reports/charts/acme/ns/t?subscription={subscription}")
        assert answer.status in (400, 412), answer
    for run in ("0", "-1", str(HUGE_INT), "1e3", "%00"):
        answer = world.send("GET", f"{ADMIN}/reports/runs/{run}")
        assert answer.status in (400, 404, 412), answer


# Last: it empties the database the module world lives in.
def test_a_billion_partitions_is_refused(http, admin_server):
    # Not on the world: were it accepted, listing the topics would enumerate the partitions.
    assert http.put(f"{ADMIN}/tenants/acme", json={}).status_code == 204
    assert http.put(f"{ADMIN}/namespaces/acme/ns").status_code == 204
    raw = RawClient(admin_server.url)
    answer = raw.send("PUT", f"{ADMIN}/persistent/acme/ns/huge/partitions", b"1000000000")
    check_answer(answer)
    assert 400 <= answer.status < 500, answer
