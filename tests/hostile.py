"""Helpers of the hostile-input suites: a raw HTTP client, the app's routes read from its
OpenAPI document, a populated world to attack, and the checks every answer must pass.

The routes come from ``/openapi.json``, so a new endpoint is attacked as soon as it exists; a
new path parameter or body type without an entry in ``PATH_VALUES`` / ``VALID_BODIES`` fails
loudly instead of being skipped.
"""

from __future__ import annotations

import http.client
import json
import re
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

import httpx
from sqlalchemy import Engine, text

ADMIN = "/admin/v2"
BOUND_SECONDS = 2.0  # every answer, refusal or not, comes within this

# The world's names, by path parameter; PUT routes create under "fresh" (``concrete``).
PATH_VALUES = {
    "tenant": "acme",
    "namespace": "ns",
    "topic": "t",
    "subName": "s",
    "subscription": "s",
    "cluster": "standalone",
    "name": "dispatchThrottlingRateInMsg",
    "value": "10",
    "run_id": "1",
    "messagePosition": "1",
    "numMessages": "1",
    "expireTimeInSeconds": "1",
    "timestamp": "0",
    "session": "sl-session-0",
    "role": "app",
    "resourcegroup": "rg",
}
FRESH = "fresh"

# A valid body for each body type, so that a request attacking something else is refused for
# that other thing only.
VALID_BODIES: dict[str, Any] = {
    "DispatchRateBody": {"dispatchThrottlingRateInMsg": 7},
    "BacklogQuotaBody": {"limitSize": 7},
    "TenantInfo": {"allowedClusters": ["standalone"]},
    "NamespacePolicies": {"replication_clusters": ["standalone"]},
    "RunRequest": {"jobs": ["rates"]},
    "SimulateRequest": {
        "tenant": "acme",
        "namespace": "ns",
        "dispatchThrottlingRateInMsg": 7,
        "since": "1h",
    },
    "PublishRateDocument": {"publishThrottlingRateInMsg": 7},
    "SubscribeRateDocument": {"subscribeThrottlingRatePerConsumer": 7},
    "DurableAcksDocument": {"replicas": 1, "timeoutMs": 500},
    "DelayedDeliveryDocument": {"active": True, "tickTime": 1000, "maxDeliveryDelayInMillis": 0},
    "ResetCursorData": {"ledgerId": -1, "entryId": -1},
    "integer": 7,
    "object": {},
    "array": ["produce", "consume"],  # a grant's actions (the permission routes)
    "string": "rg",  # a topic's resource group
}

# GET answers that change on their own (workers, clocks, reports) stay out of the snapshot.
VOLATILE = re.compile(r"/stats$|/partitioned-stats$|/lookup$|/reports/|/audit$|/health$|/ready$")


@dataclass
class Answer:
    """One HTTP answer, read whole."""

    method: str
    target: str
    status: int
    headers: dict[str, str]
    body: bytes
    elapsed: float

    def json(self) -> Any:
        return json.loads(self.body)

    def __str__(self) -> str:
        return f"{self.method} {self.target[:160]} -> {self.status} {self.body[:300]!r}"


class RawClient:
    """HTTP/1.1 on a fresh connection per request, the target sent exactly as given (no
    normalization of ``..``, no length limit), the body as bytes."""

    def __init__(self, base_url: str) -> None:
        parts = urllib.parse.urlsplit(base_url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80

    def send(
        self,
        method: str,
        target: str,
        body: bytes | None = None,
        content_type: str | None = "application/json",
        headers: dict[str, str] | None = None,
    ) -> Answer:
        sent = dict(headers or {})
        if body is not None and content_type is not None:
            sent["Content-Type"] = content_type
        connection = http.client.HTTPConnection(self.host, self.port, timeout=30)
        started = time.monotonic()
        try:
            connection.request(method, target, body=body, headers=sent)
            response = connection.getresponse()
            data = response.read()
            elapsed = time.monotonic() - started
            got = {k.lower(): v for k, v in response.getheaders()}
            return Answer(method, target, response.status, got, data, elapsed)
        finally:
            connection.close()


def reason_of(answer: Answer) -> str:
    """The ``reason`` of a JSON error body (asserting the shape)."""
    content_type = answer.headers.get("content-type", "")
    assert content_type.startswith("application/json"), f"not JSON: {answer}"
    document = answer.json()
    assert isinstance(document, dict) and set(document) == {"reason"}, f"not a reason: {answer}"
    assert isinstance(document["reason"], str) and document["reason"], f"empty reason: {answer}"
    return document["reason"]


def check_answer(answer: Answer) -> None:
    """What every answer must be: no 5xx, in time, and a refusal carries a reason."""
    assert answer.status < 500, f"server error: {answer}"
    assert answer.elapsed < BOUND_SECONDS, f"took {answer.elapsed:.2f}s: {answer}"
    if answer.status >= 400:
        reason_of(answer)


# --- the app's routes, from its OpenAPI document ----------------------------------------------


@dataclass
class Operation:
    """One route and method of the OpenAPI document."""

    method: str
    template: str
    path_params: list[str]
    query: dict[str, dict]  # name -> schema
    body: dict | None  # schema of the request body, refs resolved one level
    body_required: bool
    body_type: str | None  # component name, or the JSON type of a bare body

    def concrete(self, **overrides: str) -> str:
        """The path with the world's names (PUT creates under ``FRESH``), URL-quoted."""
        values = {}
        for index, name in enumerate(self.path_params):
            if name not in PATH_VALUES:
                raise AssertionError(f"no world value for path parameter {name!r}: add one")
            value = PATH_VALUES[name]
            if self.method == "PUT" and index == len(self.path_params) - 1:
                value = FRESH
            values[name] = overrides.get(name, urllib.parse.quote(value, safe=""))
        return self.template.format(**values)

    @property
    def valid_body(self) -> Any:
        if self.body_type is None:
            return None
        if self.body_type not in VALID_BODIES:
            raise AssertionError(f"no valid example body for {self.body_type}: add one")
        return VALID_BODIES[self.body_type]

    def __str__(self) -> str:
        return f"{self.method} {self.template}"


@dataclass
class Api:
    """The operations of the OpenAPI document, with its component schemas."""

    document: dict
    operations: list[Operation] = field(default_factory=list)

    def resolve(self, schema: dict) -> dict:
        """Follow a ``$ref`` (and a nullable ``anyOf``) to the schema it names."""
        if "anyOf" in schema:
            options = [s for s in schema["anyOf"] if s.get("type") != "null"]
            if len(options) == 1:
                schema = options[0]
        if "$ref" in schema:
            return self.document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
        return schema

    @property
    def body_operations(self) -> list[Operation]:
        return [op for op in self.operations if op.body is not None]

    def allowed(self, path: str) -> set[str]:
        """Every method some route takes on a concrete path."""
        methods = set()
        for op in self.operations:
            if re.fullmatch(re.sub(r"\{[^}]+\}", "[^/]+", op.template), path):
                methods.add(op.method)
        return methods


def load_api(base_url: str) -> Api:
    """The app's OpenAPI document as ``Operation`` objects."""
    document = httpx.get(f"{base_url}/openapi.json", timeout=30).json()
    api = Api(document)
    for template, item in document["paths"].items():
        for method, spec in item.items():
            params = spec.get("parameters", [])
            body_schema = None
            body_type = None
            required = False
            if "requestBody" in spec:
                request = spec["requestBody"]
                required = bool(request.get("required"))
                raw = request["content"]["application/json"]["schema"]
                ref = raw.get("$ref") or next(
                    (s["$ref"] for s in raw.get("anyOf", []) if "$ref" in s), None
                )
                body_schema = api.resolve(raw)
                body_type = ref.rsplit("/", 1)[1] if ref else body_schema.get("type")
            api.operations.append(
                Operation(
                    method=method.upper(),
                    template=template,
                    path_params=[p["name"] for p in params if p["in"] == "path"],
                    query={p["name"]: p.get("schema", {}) for p in params if p["in"] == "query"},
                    body=body_schema,
                    body_required=required,
                    body_type=body_type,
                )
            )
    return api


# --- the world under attack --------------------------------------------------------------------


class World:
    """A tenant, namespace, topics, a subscription and a policy at every level: what a
    refused request must leave exactly as it was."""

    NS = f"{ADMIN}/namespaces/acme/ns"
    TOPIC = f"{ADMIN}/persistent/acme/ns/t"

    def __init__(self, http: httpx.Client, db: Engine, api: Api, raw: RawClient) -> None:
        self.http = http
        self.db = db
        self.api = api
        self.raw = raw
        self.requests = 0
        self.baseline: dict[str, Any] = {}

    def build(self) -> World:
        writes = [
            ("PUT", f"{ADMIN}/tenants/acme", {"allowedClusters": ["standalone"]}),
            ("PUT", self.NS, None),
            ("PUT", self.TOPIC, None),
            ("PUT", f"{ADMIN}/persistent/acme/ns/pt/partitions", 2),
            ("PUT", f"{self.TOPIC}/subscription/s", None),
            ("POST", f"{self.NS}/dispatchRate", {"dispatchThrottlingRateInMsg": 100}),
            ("POST", f"{self.NS}/subscriptionDispatchRate", {"dispatchThrottlingRateInMsg": 50}),
            ("POST", f"{self.TOPIC}/dispatchRate", {"dispatchThrottlingRateInByte": 4096}),
            ("POST", f"{self.TOPIC}/subscriptionDispatchRate", {"ratePeriodInSecond": 2}),
            ("POST", f"{self.TOPIC}/s/dispatchRate", {"dispatchThrottlingRateInMsg": 5}),
            ("POST", f"{self.NS}/backlogQuota", {"limitSize": 1000}),
            ("POST", f"{self.TOPIC}/backlogQuota", {"limitTime": 60}),
            ("POST", f"{self.NS}/messageTTL", 600),
            ("POST", f"{self.TOPIC}/messageTTL", 30),
            ("POST", f"{self.NS}/maxUnackedMessagesPerSubscription", 1000),
            ("POST", f"{self.TOPIC}/maxUnackedMessagesOnConsumer", 10),
            ("POST", f"{ADMIN}/brokers/configuration/dispatchThrottlingRateInMsg/10000", None),
            ("POST", f"{self.NS}/permissions/app", ["consume"]),
            ("POST", f"{self.TOPIC}/permissions/app", ["produce"]),
        ]
        for method, path, body in writes:
            answer = self.http.request(method, path, json=body)
            assert answer.status_code == 204, f"{method} {path}: {answer.text}"
        return self

    def audit_count(self) -> int:
        """Rows of the audit log: every committed change writes one."""
        with self.db.connect() as connection:
            return int(connection.execute(text("SELECT count(*) FROM audit_log")).scalar_one())

    def snapshot(self) -> dict[str, Any]:
        """Every stable GET answer of the world (walked from the OpenAPI document)."""
        answers: dict[str, Any] = {}
        for op in self.api.operations:
            if op.method != "GET" or VOLATILE.search(op.template):
                continue
            if any(s.get("required") for s in op.query.values()):
                continue
            path = op.concrete()
            answer = self.http.get(path)
            answers[path] = (answer.status_code, answer.text)
        return answers

    def send(self, method: str, target: str, body: Any = None, **kwargs: Any) -> Answer:
        """Send through the raw client (``body`` as JSON unless bytes); check the answer."""
        if body is not None and not isinstance(body, bytes):
            body = json.dumps(body).encode()
        answer = self.raw.send(method, target, body, **kwargs)
        self.requests += 1
        check_answer(answer)
        return answer

    def refused(self, method: str, target: str, body: Any = None, **kwargs: Any) -> Answer:
        """Send a request that must be refused (4xx) and change nothing."""
        before = self.audit_count()
        answer = self.send(method, target, body, **kwargs)
        assert 400 <= answer.status < 500, f"not refused: {answer}"
        assert self.audit_count() == before, f"refused, yet a change was recorded: {answer}"
        return answer

    def healthy(self) -> None:
        answer = self.raw.send("GET", f"{ADMIN}/brokers/health")
        assert (answer.status, answer.body) == (200, b"ok"), answer
