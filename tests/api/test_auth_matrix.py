"""Who may call what: every route of the admin app against six kinds of caller.

The routes are read from the app's own route table, so a new endpoint fails this test until
it has an entry in ``SPECS`` (what to send and what access it needs).  The server runs with
authentication and authorization on, verifying RS256 tokens with a public key.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from fastapi.routing import APIWebSocketRoute, iter_route_contexts
from sqlalchemy import Engine, text
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect as ws_connect

from api.app import create_app
from api.auth import POLICY, Access, required_access
from api.console.router import CONSOLE_PATHS
from api.docs import ASSET_PATHS
from models.settings import Settings
from models.tokens import create_key_pair, create_token
from tests.conftest import ServerThread, flush_redis, truncate

OPEN, TENANT, SUPER = Access.OPEN, Access.TENANT_ADMIN, Access.SUPER_USER
AUTH = Access.AUTHENTICATED
RATE = {
    "dispatchThrottlingRateInMsg": 100,
    "dispatchThrottlingRateInByte": 0,
    "relativeToPublishRate": False,
    "ratePeriodInSecond": 1,
}
SUPER_ROLE = "root"
CALLERS = ("anonymous", "bad-signature", "expired", "tenant-admin", "other-tenant-admin", "super")
# Expected outcome per access level and caller: "ok" is the route's success status.
OUTCOMES = {
    OPEN: ("ok", "ok", "ok", "ok", "ok", "ok"),
    TENANT: (401, 401, 401, "ok", 403, "ok"),
    SUPER: (401, 401, 401, 403, 403, "ok"),
    AUTH: (401, 401, 401, "ok", "ok", "ok"),
}
DEFAULT_PARAMS = {
    "tenant": "acme",
    "namespace": "ns",
    "topic": "t",
    "subName": "sub",
    "subscription": "sub",
    "cluster": "standalone",
    "name": "dispatchThrottlingRatePerTopicInMsg",
    "value": "100",
    "session": "sl-session-0",
    "role": "app",
    "resourcegroup": "rg",
}


@dataclass(frozen=True)
class Spec:
    """How to call one route successfully, and who may."""

    access: Access
    status: int = 200
    params: dict[str, str] = field(default_factory=dict)
    body: object = None
    undo: tuple[tuple, ...] = ()
    query: dict[str, str] = field(default_factory=dict)


NS = "/admin/v2/namespaces/{tenant}/{namespace}"
TOPIC = "/admin/v2/persistent/{tenant}/{namespace}/{topic}"
PT = "/admin/v2/persistent/{tenant}/{namespace}/pt/partitions"


def spec(
    access: Access, status: int = 200, body: object = None, undo=(), query=None, **params
) -> Spec:
    """A ``Spec``; ``undo`` lists the (method, path template, body) calls that put a
    successful write back, so every caller starts from the same fixtures; ``query`` is the
    query string."""
    return Spec(access, status, params, body, tuple(undo), dict(query or {}))


SPECS: dict[tuple[str, str], Spec] = {
    ("GET", "/openapi.json"): spec(OPEN),
    ("GET", "/docs"): spec(OPEN),
    ("GET", "/docs/oauth2-redirect"): spec(OPEN),
    ("GET", "/redoc"): spec(OPEN),
    # The console's page and assets: a shell without data, open like the docs pages.
    **{("GET", path): spec(OPEN) for path in CONSOLE_PATHS},
    ("GET", "/admin/v2/brokers/health"): spec(OPEN),
    ("GET", "/admin/v2/brokers/ready"): spec(OPEN),
    ("GET", "/admin/v2/clusters"): spec(SUPER),
    ("GET", "/admin/v2/clusters/{cluster}"): spec(SUPER),
    ("GET", "/admin/v2/tenants"): spec(SUPER),
    ("GET", "/admin/v2/whoami"): spec(AUTH),
    ("GET", "/metrics"): spec(OPEN),
    ("GET", "/admin/v2/tenants/{tenant}"): spec(SUPER),
    ("PUT", "/admin/v2/tenants/{tenant}"): spec(
        SUPER,
        204,
        {"adminRoles": ["acme-admin"]},
        [("DELETE", "/admin/v2/tenants/newt")],
        tenant="newt",
    ),
    ("POST", "/admin/v2/tenants/{tenant}"): spec(SUPER, 204, {"adminRoles": ["acme-admin"]}),
    ("DELETE", "/admin/v2/tenants/{tenant}"): spec(
        SUPER,
        204,
        undo=[("PUT", "/admin/v2/tenants/spare", {"adminRoles": ["acme-admin"]})],
        tenant="spare",
    ),
    ("GET", "/admin/v2/brokers/configuration"): spec(SUPER),
    ("GET", "/admin/v2/brokers/configuration/values"): spec(SUPER),
    ("GET", "/admin/v2/brokers/configuration/runtime"): spec(SUPER),
    ("POST", "/admin/v2/brokers/configuration/{name}/{value}"): spec(
        SUPER, 204, undo=[("DELETE", "/admin/v2/brokers/configuration/{name}")]
    ),
    ("DELETE", "/admin/v2/brokers/configuration/{name}"): spec(SUPER, 204),
    ("GET", "/admin/v2/audit"): spec(SUPER),
    ("GET", "/admin/v2/brokers/{cluster}"): spec(SUPER),
    ("GET", "/admin/v2/brokers/{cluster}/workers"): spec(SUPER),
    # No worker runs beside this server: nobody owns the topic yet.
    ("GET", TOPIC + "/lookup"): spec(TENANT, 503),
    ("GET", "/admin/v2/reports/rates/{tenant}/{namespace}"): spec(TENANT),
    ("GET", "/admin/v2/reports/backlog/{tenant}/{namespace}"): spec(TENANT),
    ("GET", "/admin/v2/reports/charts/{tenant}/{namespace}/{topic}"): spec(
        TENANT, query={"subscription": "sub"}
    ),
    ("GET", "/admin/v2/reports/advice/{tenant}/{namespace}"): spec(TENANT),
    ("GET", "/admin/v2/reports/advice/{tenant}/{namespace}/{topic}"): spec(TENANT),
    ("POST", "/admin/v2/reports/simulate"): spec(
        TENANT,  # of the body's tenant
        200,
        {"tenant": "acme", "namespace": "ns", "dispatchThrottlingRateInMsg": 7, "since": "1h"},
    ),
    ("GET", "/admin/v2/reports/runs"): spec(SUPER),
    ("GET", "/admin/v2/reports/runs/{run_id}"): spec(SUPER, 404, run_id="1"),
    ("POST", "/admin/v2/reports/runs"): spec(SUPER, 202, {"jobs": ["rates"]}),
    ("GET", "/admin/v2/namespaces/{tenant}"): spec(TENANT),
    ("PUT", NS): spec(TENANT, 204, undo=[("DELETE", NS)], namespace="ns2"),
    ("GET", NS): spec(TENANT),
    ("DELETE", NS): spec(TENANT, 204, undo=[("PUT", NS)], namespace="empty"),
    ("GET", NS + "/topics"): spec(TENANT),
    ("GET", "/admin/v2/persistent/{tenant}/{namespace}"): spec(TENANT),
    ("GET", "/admin/v2/persistent/{tenant}/{namespace}/partitioned"): spec(TENANT),
    ("PUT", TOPIC): spec(TENANT, 204, undo=[("DELETE", TOPIC)], topic="t2"),
    ("DELETE", TOPIC): spec(
        TENANT,
        204,
        undo=[
            ("PUT", TOPIC),
            ("PUT", TOPIC + "/subscription/sub"),
            ("POST", TOPIC + "/permissions/app", ["produce"]),
        ],
    ),
    ("PUT", TOPIC + "/partitions"): spec(
        TENANT, 204, 2, [("DELETE", TOPIC + "/partitions")], topic="pt2"
    ),
    ("POST", TOPIC + "/partitions"): spec(
        TENANT, 204, 3, [("DELETE", PT), ("PUT", PT, 2)], topic="pt"
    ),
    ("GET", TOPIC + "/partitions"): spec(TENANT, topic="pt"),
    ("DELETE", TOPIC + "/partitions"): spec(TENANT, 204, undo=[("PUT", PT, 2)], topic="pt"),
    ("GET", TOPIC + "/subscriptions"): spec(TENANT),
    ("PUT", TOPIC + "/subscription/{subscription}"): spec(
        TENANT, 204, undo=[("DELETE", TOPIC + "/subscription/s2")], subscription="s2"
    ),
    ("DELETE", TOPIC + "/subscription/{subscription}"): spec(
        TENANT, 204, undo=[("PUT", TOPIC + "/subscription/sub")]
    ),
    ("GET", TOPIC + "/stats"): spec(TENANT),
    ("GET", TOPIC + "/partitioned-stats"): spec(TENANT, topic="pt"),
    ("GET", TOPIC + "/effectiveDispatchRates"): spec(TENANT),
}
for _path in (
    NS + "/dispatchRate",
    NS + "/subscriptionDispatchRate",
    TOPIC + "/dispatchRate",
    TOPIC + "/subscriptionDispatchRate",
    TOPIC + "/{subName}/dispatchRate",
):
    SPECS[("GET", _path)] = spec(TENANT)
    SPECS[("POST", _path)] = spec(TENANT, 204, RATE, [("DELETE", _path)])
    SPECS[("DELETE", _path)] = spec(TENANT, 204)

# Flow controls: (path, read path, body of a successful write).
QUOTA = {"limitSize": 1_000_000, "limitTime": -1, "policy": "producer_exception"}
for _path, _read, _body in (
    (NS + "/backlogQuota", NS + "/backlogQuotaMap", QUOTA),
    (NS + "/durableAcks", NS + "/durableAcks", {"replicas": 1, "timeoutMs": 500}),
    (TOPIC + "/durableAcks", TOPIC + "/durableAcks", {"replicas": 1, "timeoutMs": 500}),
    (NS + "/delayedDelivery", NS + "/delayedDelivery", {"active": False, "tickTime": 5}),
    (TOPIC + "/delayedDelivery", TOPIC + "/delayedDelivery", {"active": False, "tickTime": 5}),
    (TOPIC + "/backlogQuota", TOPIC + "/backlogQuotaMap", QUOTA),
    *(
        (NS + f"/{name}", NS + f"/{name}", 100)
        for name in (
            "maxUnackedMessagesPerSubscription",
            "maxUnackedMessagesPerConsumer",
            "messageTTL",
            "maxTopicsPerNamespace",
            "maxSubscriptionsPerTopic",
            "maxProducersPerTopic",
            "maxConsumersPerTopic",
            "maxConsumersPerSubscription",
            "backlogDrainTargetSeconds",
            "priorityOldestEvery",
        )
    ),
    *(
        (TOPIC + f"/{name}", TOPIC + f"/{name}", 100)
        for name in (
            "maxUnackedMessagesOnSubscription",
            "maxUnackedMessagesOnConsumer",
            "messageTTL",
            "maxSubscriptionsPerTopic",
            "maxProducers",
            "maxConsumers",
            "maxConsumersPerSubscription",
            "maxMessageSize",
            "backlogDrainTargetSeconds",
            "priorityOldestEvery",
        )
    ),
):
    SPECS[("GET", _read)] = spec(TENANT)
    SPECS[("POST", _path)] = spec(TENANT, 204, _body, [("DELETE", _path)])
    SPECS[("DELETE", _path)] = spec(TENANT, 204)
SPECS[("GET", TOPIC + "/effectiveFlowControls")] = spec(TENANT)

# Publish and subscribe rates.
for _path, _body in (
    (NS + "/publishRate", {"publishThrottlingRateInMsg": 100, "publishThrottlingRateInByte": -1}),
    (TOPIC + "/publishRate", {"publishThrottlingRateInMsg": 100}),
    (NS + "/subscribeRate", {"subscribeThrottlingRatePerConsumer": 5, "ratePeriodInSecond": 30}),
    (TOPIC + "/subscribeRate", {"subscribeThrottlingRatePerConsumer": 5}),
):
    SPECS[("GET", _path)] = spec(TENANT)
    SPECS[("POST", _path)] = spec(TENANT, 204, _body, [("DELETE", _path)])
    SPECS[("DELETE", _path)] = spec(TENANT, 204)

# Permissions: role app has a grant on namespace ns and on topic t (``Admin.reset``); a
# revoke is undone by granting again.
for _path, _body in ((NS + "/permissions", ["consume"]), (TOPIC + "/permissions", ["produce"])):
    SPECS[("GET", _path)] = spec(TENANT)
    SPECS[("POST", _path + "/{role}")] = spec(
        TENANT, 204, ["produce", "consume"], [("POST", _path + "/{role}", _body)]
    )
    SPECS[("DELETE", _path + "/{role}")] = spec(
        TENANT, 204, undo=[("POST", _path + "/{role}", _body)]
    )

# Subscription permissions: subscription sub of namespace ns lists role app
# (``Admin.reset``); a write is undone by setting the list again.
_SUB_ROLES = ("POST", NS + "/permissions/subscription/{subscription}", ["app"])
SPECS[("GET", NS + "/permissions/subscription")] = spec(TENANT)
SPECS[_SUB_ROLES[:2]] = spec(TENANT, 204, ["app", "other"], [_SUB_ROLES], subscription="sub")
SPECS[("DELETE", NS + "/permissions/{subscription}/{role}")] = spec(
    TENANT, 204, undo=[_SUB_ROLES], subscription="sub"
)

# Subscription and topic operations: subscription sub of topic t has no messages (peek and
# examine find none) and no worker owns t (the lookup answers 503).
SUB = TOPIC + "/subscription/{subName}"
SPECS.update(
    {
        ("POST", SUB + "/skip_all"): spec(TENANT, 204),
        ("POST", SUB + "/skip/{numMessages}"): spec(TENANT, 204, numMessages="1"),
        ("POST", SUB + "/expireMessages/{expireTimeInSeconds}"): spec(
            TENANT, 204, expireTimeInSeconds="1"
        ),
        ("POST", TOPIC + "/all_subscription/expireMessages/{expireTimeInSeconds}"): spec(
            TENANT, 204, expireTimeInSeconds="1"
        ),
        ("POST", SUB + "/resetcursor/{timestamp}"): spec(TENANT, 204, timestamp="0"),
        ("POST", SUB + "/resetcursor"): spec(TENANT, 204, "earliest"),
        ("GET", SUB + "/position/{messagePosition}"): spec(TENANT, 404, messagePosition="1"),
        ("GET", TOPIC + "/examinemessage"): spec(TENANT, 404),
        ("GET", TOPIC + "/internalStats"): spec(TENANT),
        ("GET", TOPIC + "/partitioned-internalStats"): spec(TENANT, topic="pt"),
        ("PUT", TOPIC + "/unload"): spec(TENANT, 204),
        ("GET", "/lookup/v2/topic/persistent/{tenant}/{namespace}/{topic}"): spec(TENANT, 503),
    }
)
# Data-plane sessions: any role may open one (what it may do follows its grants, checked on
# Redis by tests/workers/test_data_plane_acl.py); a session of another caller is unknown (404).
# A topic lookup needs a grant on the topic, which a tenant's admin roles have.
SPECS.update(
    {
        ("POST", "/admin/v2/dataplane/sessions"): spec(AUTH, 201),
        ("POST", "/admin/v2/dataplane/sessions/{session}"): spec(AUTH, 404),
        ("DELETE", "/admin/v2/dataplane/sessions/{session}"): spec(AUTH, 404),
        ("GET", "/admin/v2/dataplane/partitions/persistent/{tenant}/{namespace}/{topic}"): spec(
            TENANT
        ),
    }
)

# Resource groups: CRUD is a super-user's (as in Pulsar); attaching follows the target's
# policy permissions (a tenant's: super-user, as every tenant route).  Group rg exists.
RG = "/admin/v2/resourcegroups/{resourcegroup}"
RG_BODY = {"dispatchRateInMsgs": 100}
SPECS.update(
    {
        ("GET", "/admin/v2/resourcegroups"): spec(SUPER),
        ("GET", RG): spec(SUPER),
        ("PUT", RG): spec(SUPER, 204, {"dispatchRateInMsgs": 50}, [("PUT", RG, RG_BODY)]),
        ("DELETE", RG): spec(SUPER, 204, undo=[("PUT", RG, RG_BODY)]),
        ("GET", RG + "/attachments"): spec(SUPER),
        ("GET", NS + "/resourcegroup"): spec(TENANT),
        ("POST", NS + "/resourcegroup/{resourcegroup}"): spec(
            TENANT, 204, undo=[("DELETE", NS + "/resourcegroup")]
        ),
        ("DELETE", NS + "/resourcegroup"): spec(TENANT, 204),
        ("GET", TOPIC + "/resourceGroup"): spec(TENANT),
        ("POST", TOPIC + "/resourceGroup"): spec(
            TENANT, 204, "rg", [("DELETE", TOPIC + "/resourceGroup")]
        ),
        ("DELETE", TOPIC + "/resourceGroup"): spec(TENANT, 204),
        ("GET", "/admin/v2/tenants/{tenant}/resourcegroup"): spec(SUPER),
        ("POST", "/admin/v2/tenants/{tenant}/resourcegroup/{resourcegroup}"): spec(
            SUPER, 204, undo=[("DELETE", "/admin/v2/tenants/{tenant}/resourcegroup")]
        ),
        ("DELETE", "/admin/v2/tenants/{tenant}/resourcegroup"): spec(SUPER, 204),
    }
)


def app_routes() -> list[tuple[str, str]]:
    """Every (method, path template) the admin app serves (HEAD aside)."""
    app = create_app(Settings(_env_file=None))
    return sorted(
        (method, context.path_format)
        for context in iter_route_contexts(app.routes)
        for method in context.methods or ()
        if method != "HEAD"
    )


ROUTES = app_routes()


@dataclass
class Keys:
    """Tokens for every kind of caller, and the public key the server trusts."""

    public_key_file: Path
    tokens: dict[str, str | None]


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> Keys:
    folder = tmp_path_factory.mktemp("keys")
    private, public = create_key_pair("RS256")
    (folder / "public.pem").write_bytes(public)
    stranger, _ = create_key_pair("RS256")

    def token(role: str, **extra) -> str:
        return create_token(subject=role, private_key=extra.pop("key", private), **extra)

    return Keys(
        folder / "public.pem",
        {
            "anonymous": None,
            "bad-signature": token(SUPER_ROLE, key=stranger),
            "expired": token(SUPER_ROLE, expires_in=timedelta(seconds=-10)),
            "tenant-admin": token("acme-admin", expires_in=timedelta(hours=1)),
            "other-tenant-admin": token("other-admin"),
            "super": token(SUPER_ROLE),
            "app": token("app"),  # no admin role: what it may do comes from its grants
        },
    )


@pytest.fixture(scope="module")
def secure_server(settings: Settings, keys: Keys) -> Iterator[ServerThread]:
    secure = settings.model_copy(
        update={
            "authentication_enabled": True,
            "authorization_enabled": True,
            "super_user_roles": f"ops, {SUPER_ROLE}",
            "token_public_key_file": str(keys.public_key_file),
        }
    )
    server = ServerThread(create_app(secure)).start()
    yield server
    server.stop()


class Admin:
    """HTTP calls to the secured server as a chosen caller; ``reset`` rebuilds the fixtures."""

    def __init__(self, server: ServerThread, keys: Keys, db: Engine, redis_url: str) -> None:
        self.client = httpx.Client(base_url=server.url, timeout=30)
        self.tokens = keys.tokens
        self.db = db
        self.redis_url = redis_url
        self.dirty = True

    def ensure_fixtures(self) -> None:
        """Rebuild the fixtures unless the previous test left them as they were."""
        if self.dirty:
            self.reset()
            self.dirty = False

    def call(self, caller: str, method: str, path: str, **kwargs) -> httpx.Response:
        token = self.tokens[caller]
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return self.client.request(method, path, headers=headers, **kwargs)

    def ok(self, method: str, path: str, body: object = None) -> None:
        answer = self.call("super", method, path, json=body)
        assert answer.status_code == 204, (path, answer.text)

    def reset(self) -> None:
        """Empty the database and Redis; create tenants acme, other, spare and acme's
        namespaces ns and empty, topic t with subscription sub, partitioned topic pt, and
        role app's grants on ns and t."""
        truncate(self.db)
        flush_redis(self.redis_url)
        for tenant, admins in (("acme", ["acme-admin"]), ("other", ["other-admin"])):
            self.ok("PUT", f"/admin/v2/tenants/{tenant}", {"adminRoles": admins})
        self.ok("PUT", "/admin/v2/tenants/spare", {"adminRoles": ["acme-admin"]})
        self.ok("PUT", "/admin/v2/namespaces/acme/ns")
        self.ok("PUT", "/admin/v2/namespaces/acme/empty")
        self.ok("PUT", "/admin/v2/persistent/acme/ns/t")
        self.ok("PUT", "/admin/v2/persistent/acme/ns/pt/partitions", 2)
        self.ok("PUT", "/admin/v2/persistent/acme/ns/t/subscription/sub")
        self.ok("POST", "/admin/v2/namespaces/acme/ns/permissions/app", ["consume"])
        self.ok("POST", "/admin/v2/persistent/acme/ns/t/permissions/app", ["produce"])
        self.ok("POST", "/admin/v2/namespaces/acme/ns/permissions/subscription/sub", ["app"])
        self.ok("PUT", "/admin/v2/resourcegroups/rg", {"dispatchRateInMsgs": 100})


@pytest.fixture(scope="module")
def admin(secure_server, keys, db, redis_server) -> Iterator[Admin]:
    client = Admin(secure_server, keys, db, redis_server.url)
    yield client
    client.client.close()


@pytest.mark.parametrize(("method", "template"), ROUTES, ids=[f"{m} {p}" for m, p in ROUTES])
def test_role_matrix(admin: Admin, method: str, template: str) -> None:
    spec = SPECS.get((method, template))
    assert spec is not None, f"{method} {template}: no entry in SPECS (decide who may call it)"
    params = {**DEFAULT_PARAMS, **spec.params}
    admin.ensure_fixtures()
    admin.dirty = True
    seen = {}
    for caller in CALLERS:
        answer = admin.call(
            caller, method, template.format(**params), json=spec.body, params=spec.query
        )
        seen[caller] = "ok" if answer.status_code == spec.status else answer.status_code
        if answer.status_code in (401, 403):
            assert answer.json()["reason"], answer.text
        if seen[caller] == "ok":
            for undo_method, undo_path, *body in spec.undo:
                admin.ok(undo_method, undo_path.format(**params), *body)
    assert seen == dict(zip(CALLERS, OUTCOMES[spec.access], strict=True))
    admin.dirty = False


def test_whoami_lists_the_tenants_a_role_may_administer(admin: Admin) -> None:
    admin.ensure_fixtures()
    answers = {caller: admin.call(caller, "GET", "/admin/v2/whoami") for caller in CALLERS}
    assert {c: a.status_code for c, a in answers.items()} == dict(
        zip(CALLERS, (401, 401, 401, 200, 200, 200), strict=True)
    )
    flags = {"authenticationEnabled": True, "authorizationEnabled": True}
    assert answers["tenant-admin"].json() == {
        "role": "acme-admin",
        "superUser": False,
        **flags,
        "tenants": ["acme", "spare"],  # spare names acme-admin too; other does not
    }
    assert answers["other-tenant-admin"].json()["tenants"] == ["other"]
    assert answers["super"].json() == {
        "role": SUPER_ROLE,
        "superUser": True,
        **flags,
        "tenants": ["acme", "other", "spare"],
    }


def test_audit_records_the_authenticated_role(admin: Admin, db: Engine) -> None:
    admin.reset()
    admin.dirty = True
    path = "/admin/v2/namespaces/acme/ns/dispatchRate"
    assert admin.call("tenant-admin", "POST", path, json=RATE).status_code == 204
    with db.connect() as connection:
        roles = connection.execute(
            text("SELECT role FROM audit_log WHERE entity_type = 'namespace.dispatchRate'")
        ).scalars()
        assert list(roles) == ["acme-admin"]
    entries = admin.call("super", "GET", "/admin/v2/audit", params={"role": SUPER_ROLE}).json()
    assert {e["entity"] for e in entries} >= {"acme", "acme/ns", "persistent://acme/ns/t"}


def test_unauthenticated_answers_carry_reason_and_challenge(admin: Admin) -> None:
    answer = admin.call("anonymous", "GET", "/admin/v2/tenants")
    assert answer.status_code == 401
    assert answer.headers["WWW-Authenticate"] == "Bearer"
    assert answer.json() == {
        "reason": "Authentication required: send Authorization: Bearer <token>"
    }
    assert admin.call("expired", "GET", "/admin/v2/tenants").json() == {"reason": "Token expired"}
    garbage = admin.client.get("/admin/v2/tenants", headers={"Authorization": "Bearer x.y.z"})
    assert (garbage.status_code, garbage.json()) == (401, {"reason": "Malformed token"})
    basic = admin.client.get("/admin/v2/tenants", headers={"Authorization": "Basic cm9vdDp4"})
    assert basic.status_code == 401


def test_the_docs_assets_are_open_like_the_docs(admin: Admin) -> None:
    for path in ASSET_PATHS:
        assert admin.call("anonymous", "GET", path).status_code == 200, path
    assert admin.call("anonymous", "GET", "/docs/assets/nothing.js").status_code == 401


def test_the_token_is_checked_before_the_body_is_read(admin: Admin) -> None:
    # Pulsar answers an unauthenticated call 401 whatever it sent: no 400 about the body, no
    # 404 about the path, no 413 below the size cap.
    path = "/admin/v2/namespaces/acme/ns/dispatchRate"
    bad_json = {"Content-Type": "application/json"}
    for caller in ("anonymous", "expired", "bad-signature"):
        token = admin.tokens[caller]
        headers = {**bad_json, **({"Authorization": f"Bearer {token}"} if token else {})}
        answer = admin.client.post(path, content=b"{not json", headers=headers)
        assert answer.status_code == 401, (caller, answer.text)
        assert answer.headers["WWW-Authenticate"] == "Bearer"
        assert answer.json()["reason"]
    unknown = admin.call("anonymous", "GET", "/admin/v2/no-such-thing")
    assert unknown.status_code == 401
    # Authenticated, the same body is refused for what it is.
    answer = admin.client.post(
        path,
        content=b"{not json",
        headers={**bad_json, "Authorization": f"Bearer {admin.tokens['super']}"},
    )
    assert answer.status_code == 400 and answer.json()["reason"]
    # Open paths need no token; a path below one (a cluster named "health") is not open.
    assert admin.call("anonymous", "GET", "/admin/v2/brokers/health").status_code == 200
    assert admin.call("anonymous", "GET", "/admin/v2/brokers/health/workers").status_code == 401
    assert admin.call("anonymous", "GET", "/openapi.json").status_code == 200


def test_tenant_admin_is_refused_where_the_tenant_changed(admin: Admin) -> None:
    admin.reset()
    admin.dirty = True
    path = "/admin/v2/namespaces/acme"
    assert admin.call("tenant-admin", "GET", path).status_code == 200
    admin.ok("POST", "/admin/v2/tenants/acme", {"adminRoles": ["someone-else"]})
    refused = admin.call("tenant-admin", "GET", path)
    assert refused.status_code == 403
    assert refused.json() == {"reason": "Role acme-admin is not an admin of tenant acme"}
    assert admin.call("tenant-admin", "GET", "/admin/v2/namespaces/nope").status_code == 403


# --- Pulsar's WebSocket API: the same tokens, from the header or the token query parameter ---

WS_PATHS = {
    "producer": "/ws/v2/producer/persistent/acme/ns/t",
    # Shared: each caller's consumer may join while the previous one is still closing.
    "consumer": "/ws/v2/consumer/persistent/acme/ns/t/wsub?subscriptionType=Shared",
    "reader": "/ws/v2/reader/persistent/acme/ns/t",
}


def test_every_websocket_route_is_classified() -> None:
    app = create_app(Settings())
    templates = {route.path_format for route in app.routes if isinstance(route, APIWebSocketRoute)}
    assert templates == {
        "/ws/v2/producer/persistent/{tenant}/{namespace}/{topic}",
        "/ws/v2/consumer/persistent/{tenant}/{namespace}/{topic}/{subscription}",
        "/ws/v2/reader/persistent/{tenant}/{namespace}/{topic}",
    }
    for template in templates:
        assert any(template.startswith(prefix + "/") for prefix in POLICY), template
        assert required_access(template) is TENANT


def _ws_status(admin: Admin, server: ServerThread, path: str, caller: str, how: str) -> int:
    """101 when the handshake succeeds, else the HTTP status that refused it."""
    token = admin.tokens[caller]
    url = server.url.replace("http://", "ws://") + path
    headers = {}
    if token and how == "header":
        headers["Authorization"] = f"Bearer {token}"
    elif token:
        url += ("&" if "?" in url else "?") + f"token={token}"
    try:
        with ws_connect(url, additional_headers=headers, open_timeout=10):
            return 101
    except InvalidStatus as refused:
        return refused.response.status_code


@pytest.mark.parametrize("how", ["header", "query"])
@pytest.mark.parametrize("kind", list(WS_PATHS))
def test_websocket_handshakes_follow_the_policy(
    admin: Admin, secure_server: ServerThread, kind: str, how: str
) -> None:
    admin.ensure_fixtures()
    expected = dict(zip(CALLERS, OUTCOMES[TENANT], strict=True))
    for caller in CALLERS:
        status = _ws_status(admin, secure_server, WS_PATHS[kind], caller, how)
        want = 101 if expected[caller] == "ok" else expected[caller]
        assert status == want, (kind, how, caller, status)


def test_a_revoked_grant_closes_the_websockets_it_admitted(
    admin: Admin, secure_server: ServerThread
) -> None:
    # Role app consumes acme/ns by its namespace grant (and produces to t by a topic grant).
    admin.ensure_fixtures()
    admin.dirty = True
    base = secure_server.url.replace("http://", "ws://")
    headers = {"Authorization": f"Bearer {admin.tokens['app']}"}
    consumer_url = base + WS_PATHS["consumer"]
    producer_url = base + WS_PATHS["producer"]
    with (
        ws_connect(consumer_url, additional_headers=headers, open_timeout=10) as consumer,
        ws_connect(producer_url, additional_headers=headers, open_timeout=10) as producer,
    ):
        admin.ok("DELETE", "/admin/v2/namespaces/acme/ns/permissions/app")
        with pytest.raises(ConnectionClosed) as closed:
            consumer.recv(timeout=10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
        assert closed.value.rcvd.reason.startswith("Authorization revoked: app may not consume")
        # The producer's own topic grant still holds: that connection stays open.
        producer.send('{"payload": "aGk="}')
        assert '"result":"ok"' in producer.recv(timeout=10).replace(" ", "")
    # And a new consumer connection is refused.
    assert _ws_status(admin, secure_server, WS_PATHS["consumer"], "app", "header") == 403
