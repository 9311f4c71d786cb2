"""The data plane's role matrix: what a client's token lets it do on Redis, enforced by Redis.

A Redis with the ACL file of ``dataplane.acl`` (``default`` off, the admin service and the
worker as their own users), the admin service with authentication and authorization on, a
worker, and clients that connect through the admin service with a role's token
(``sluice.Client(http_url, authentication=sluice.AuthenticationToken(token))``).  For every
kind of role: producing and consuming where it was granted, on another namespace and on
another tenant, then raw redis-py calls with the very credentials its client received.  Every
refusal is checked to have changed nothing (the other tenant's stream, its subscription's
pending entries, the granted topic's stream, the subscriptions that exist).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
import redis
from sqlalchemy import text
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect as ws_connect

import sluice
from api.app import create_app
from dataplane.acl import SERVICE_USERS, render_acl_file, script_sha
from models.settings import Settings
from models.tokens import create_secret_key, create_token
from server.embedded_redis import EmbeddedRedis
from sluice.protocol import keys
from sluice.protocol.names import TopicName
from sluice.protocol.urls import with_credentials
from tests.conftest import ServerThread, truncate
from tests.workers.conftest import ADMIN, WorkerThread

ROOT = "root"
GRANTED = "persistent://acme/orders/created"
SIBLING = "persistent://acme/orders/other"  # same namespace, not in a topic grant
OTHER_NS = "persistent://acme/billing/t"
OTHER_TENANT = "persistent://globex/secret/t"
SECRET_SUB = "audit"


class World:
    """The secured deployment and a super-user's view of it."""

    def __init__(self, url: str, redis_url: str, secret: bytes) -> None:
        self.url = url
        self.secret = secret
        self.redis = redis.Redis.from_url(redis_url)  # the admin service's user: sees all
        self.http = httpx.Client(base_url=url, timeout=30)
        self.server: EmbeddedRedis | None = None

    def token(self, role: str, seconds: float | None = None) -> str:
        expires = timedelta(seconds=seconds) if seconds is not None else None
        return create_token(subject=role, secret_key=self.secret, expires_in=expires)

    def call(self, method: str, path: str, body: object = None, role: str = ROOT) -> None:
        headers = {"Authorization": f"Bearer {self.token(role)}"}
        answer = self.http.request(method, ADMIN + path, json=body, headers=headers)
        assert answer.status_code in (200, 204), (method, path, answer.text)

    def client(self, role: str, seconds: float | None = None) -> sluice.Client:
        token = sluice.AuthenticationToken(self.token(role, seconds))
        return sluice.Client(self.url, authentication=token)

    def users(self) -> set[str]:
        """The Redis ACL users."""
        return {u.decode() if isinstance(u, bytes) else u for u in self.redis.acl_users()}

    def snapshot(self) -> dict:
        """What a refused call must not change."""
        r = self.redis
        state = {}
        for topic in (GRANTED, SIBLING, OTHER_NS, OTHER_TENANT):
            name = TopicName.from_full(topic)
            log = keys.log(name)
            groups = r.xinfo_groups(log) if r.exists(log) else []
            state[topic] = (
                r.xlen(log),
                sorted((g["name"], g["pending"], g["last-delivered-id"]) for g in groups),
                sorted(r.smembers(keys.subs(name))),
            )
        state["topics"] = sorted(r.hkeys(keys.TOPICS))
        return state


@pytest.fixture(scope="module")
def world(settings: Settings, db, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    folder: Path = tmp_path_factory.mktemp("acl-redis")
    passwords = {service: secrets.token_urlsafe(16) for service in SERVICE_USERS}
    (folder / "users.acl").write_text(render_acl_file(passwords))
    server = EmbeddedRedis(
        folder / "data",
        appendonly=True,
        acl_file=folder / "users.acl",
        username=SERVICE_USERS["api"],
        password=passwords["api"],
    ).start()
    plain = f"redis://127.0.0.1:{server.port}/0"
    secret = create_secret_key()
    (folder / "secret.key").write_bytes(secret)
    secure = settings.model_copy(
        update={
            "redis_url": server.url,
            "authentication_enabled": True,
            "authorization_enabled": True,
            "super_user_roles": ROOT,
            "token_secret_key_file": str(folder / "secret.key"),
        }
    )
    truncate(db)
    api = ServerThread(create_app(secure)).start()
    worker_url = with_credentials(plain, SERVICE_USERS["worker"], passwords["worker"])
    worker = WorkerThread(
        secure.model_copy(
            update={
                "redis_url": worker_url,
                "worker_http_port": 0,
                "consumer_timeout_seconds": 3.0,
                "worker_id": "acl-worker",
            }
        )
    ).start()
    w = World(api.url, server.url, secret)
    w.server = server
    try:
        for tenant in ("acme", "globex"):
            w.call("PUT", f"/tenants/{tenant}", {"allowedClusters": ["standalone"]})
        for namespace in ("acme/orders", "acme/billing", "globex/secret"):
            w.call("PUT", f"/namespaces/{namespace}")
        for topic in (GRANTED, SIBLING, OTHER_NS, OTHER_TENANT):
            w.call("PUT", "/persistent/" + topic.removeprefix("persistent://"))
        grants = {
            "both": ["produce", "consume"],
            "producer": ["produce"],
            "consumer": ["consume"],
        }
        for role, actions in grants.items():
            w.call("POST", f"/namespaces/acme/orders/permissions/{role}", actions)
        w.call("POST", "/persistent/acme/orders/created/permissions/topic-consumer", ["consume"])
        # The other tenant's secrets: three messages, received and not acknowledged.
        with w.client(ROOT) as root:
            consumer = root.subscribe(OTHER_TENANT, SECRET_SUB)
            producer = root.create_producer(OTHER_TENANT)
            for i in range(3):
                producer.send(b"secret-%d" % i)
            for _ in range(3):
                consumer.receive(10_000)
            consumer.close()
        yield w
    finally:
        w.http.close()
        worker.stop()
        api.stop()
        w.redis.close()
        server.stop()


def _outcome(action: Callable[[], object]) -> str:
    try:
        action()
    except sluice.AuthorizationError as exc:
        return "denied" if "persistent://" in str(exc) else f"unnamed: {exc}"
    return "ok"


def _produce(client: sluice.Client, topic: str) -> Callable[[], object]:
    def run() -> None:
        producer = client.create_producer(topic)
        producer.send(b"hello")
        producer.close()

    return run


def _consume(client: sluice.Client, topic: str, world: World) -> Callable[[], object]:
    def run() -> None:
        consumer = client.subscribe(topic, "mine", consumer_type=sluice.ConsumerType.Shared)
        try:
            with world.client(ROOT) as root:  # something to receive
                root.create_producer(topic).send(b"for-mine")
            message = consumer.receive(10_000)
            consumer.acknowledge(message)
        finally:
            consumer.close()

    return run


# role -> (produce granted topic, consume granted topic, produce sibling, consume sibling,
#          produce other namespace, consume other tenant)
MATRIX = {
    "both": ("ok", "ok", "ok", "ok", "denied", "denied"),
    "producer": ("ok", "denied", "ok", "denied", "denied", "denied"),
    "consumer": ("denied", "ok", "denied", "ok", "denied", "denied"),
    "topic-consumer": ("denied", "ok", "denied", "denied", "denied", "denied"),
    "stranger": ("denied",) * 6,
    ROOT: ("ok",) * 6,
}


@pytest.mark.parametrize("role", list(MATRIX))
def test_role_matrix_on_the_data_plane(world: World, role: str) -> None:
    with world.client(role) as client:
        attempts = (
            _produce(client, GRANTED),
            _consume(client, GRANTED, world),
            _produce(client, SIBLING),
            _consume(client, SIBLING, world),
            _produce(client, OTHER_NS),
            _consume(client, OTHER_TENANT, world),
        )
        seen = []
        for attempt, expected in zip(attempts, MATRIX[role], strict=True):
            before = world.snapshot()
            outcome = _outcome(attempt)
            seen.append(outcome)
            if outcome != "ok":
                # The consume attempts' own message (sent by a super-user) never went out:
                # a refusal comes before it.  Nothing else may have changed either.
                assert world.snapshot() == before, (role, expected)
        assert tuple(seen) == MATRIX[role]


def _raw(client: sluice.Client) -> redis.Redis:
    """A plain redis-py connection with the credentials ``client`` received."""
    kwargs = client.redis.connection_pool.connection_kwargs
    assert kwargs["username"].startswith("sl-session-")
    return redis.Redis(
        host=kwargs["host"],
        port=kwargs["port"],
        username=kwargs["username"],
        password=kwargs["password"],
    )


def test_issued_credentials_cannot_touch_other_tenants_or_administer(world: World) -> None:
    other = TopicName.from_full(OTHER_TENANT)
    log = keys.log(other)
    pending = world.redis.xpending_range(log, SECRET_SUB, "-", "+", 10)
    some_id = pending[0]["message_id"]
    with world.client("both") as client:
        raw = _raw(client)
        granted_log = keys.log(TopicName.from_full(GRANTED))
        attacks = {
            "read another tenant's stream": lambda: raw.xrange(log),
            "read it as a group": lambda: raw.xreadgroup(SECRET_SUB, "x", {log: "0"}),
            "ack another tenant's message": lambda: raw.xack(log, SECRET_SUB, some_id),
            "claim it": lambda: raw.xclaim(log, SECRET_SUB, "x", 0, [some_id]),
            "append to another tenant": lambda: raw.xadd(log, {"d": b"forged"}),
            "delete another tenant's stream": lambda: raw.delete(log),
            "trim it": lambda: raw.xtrim(log, 0),
            "destroy its subscription": lambda: raw.xgroup_destroy(log, SECRET_SUB),
            "produce there through the script": lambda: client.scripts["produce"](
                keys=[log, keys.partition_stats(other), keys.idle(other)],
                args=[keys.WAKE_CHANNEL, "x", 1, 1, "d", "forged"],
            ),
            "delete the granted stream": lambda: raw.delete(granted_log),
            "FLUSHALL": raw.flushall,
            "FLUSHDB": raw.flushdb,
            "CONFIG GET": lambda: raw.config_get("*"),
            "CONFIG SET": lambda: raw.config_set("maxmemory", "1"),
            "KEYS": lambda: raw.keys("*"),
            "SCAN": lambda: raw.scan(0),
            "ACL LIST": raw.acl_list,
            "ACL SETUSER": lambda: raw.acl_setuser("intruder", enabled=True),
            "EVAL": lambda: raw.eval("return redis.call('DEL', KEYS[1])", 1, log),
            "SCRIPT LOAD": lambda: raw.script_load("return 1"),
            "SCRIPT FLUSH": raw.script_flush,
            "a worker's script": lambda: raw.evalsha(script_sha("trim"), 1, granted_log),
            "list every topic": lambda: raw.hgetall(keys.TOPICS),
            "rewrite the topic registry": lambda: raw.hset(keys.TOPICS, OTHER_TENANT, "{}"),
            "take a partition's lease": lambda: raw.set(
                keys.lease(TopicName.from_full(GRANTED)), "9"
            ),
            "CLIENT KILL": lambda: raw.client_kill_filter(skipme=True),
            "SHUTDOWN": lambda: raw.shutdown(nosave=True),
            "MONITOR": lambda: raw.execute_command("MONITOR"),
        }
        allowed = {}
        for name, attack in attacks.items():
            before = world.snapshot()
            try:
                allowed[name] = attack()
            except redis.exceptions.NoPermissionError:
                assert world.snapshot() == before, name
        raw.close()
    assert allowed == {}
    # And what it was granted works with the same credentials.
    assert world.redis.xpending(log, SECRET_SUB)["pending"] == 3


@pytest.mark.parametrize(
    ("role", "kind", "expected"),
    [
        ("consumer", "consumer", 101),
        ("consumer", "reader", 101),
        ("consumer", "producer", 403),
        ("producer", "producer", 101),
        ("producer", "consumer", 403),
        ("topic-consumer", "consumer", 101),
        ("stranger", "reader", 403),
    ],
)
def test_websocket_handshakes_follow_the_grants(
    world: World, role: str, kind: str, expected: int
) -> None:
    path = "/ws/v2/" + kind + "/persistent/acme/orders/created"
    if kind == "consumer":
        path += f"/ws-{role}"
    url = world.url.replace("http://", "ws://") + path
    headers = {"Authorization": f"Bearer {world.token(role)}"}
    try:
        with ws_connect(url, additional_headers=headers, open_timeout=10):
            status = 101
    except InvalidStatus as refused:
        status = refused.response.status_code
    assert status == expected
    if kind == "reader" and status == 101:
        # A reader's subscription goes with its connection, once the server has finished the
        # session (after the client closed): wait for it, so that no later test sees it go.
        subs = keys.subs(TopicName.from_full(GRANTED))
        deadline = time.monotonic() + 10
        while any(s.startswith(b"reader-") for s in world.redis.smembers(subs)):
            assert time.monotonic() < deadline, "the reader's subscription outlived it"
            time.sleep(0.05)


def test_the_default_user_is_off(world: World) -> None:
    port = world.redis.connection_pool.connection_kwargs["port"]
    anonymous = redis.Redis(port=port)
    with pytest.raises(redis.exceptions.AuthenticationError):
        anonymous.ping()
    anonymous.close()


def _working_pair(
    world: World, client: sluice.Client, role: str
) -> tuple[sluice.Producer, sluice.Consumer]:
    """A producer and a consumer of ``role`` (granted both actions on the namespace now; the
    ``client`` is its), one message through them."""
    world.call("POST", f"/namespaces/acme/orders/permissions/{role}", ["produce", "consume"])
    producer = client.create_producer(GRANTED)
    consumer = client.subscribe(GRANTED, role, consumer_type=sluice.ConsumerType.Shared)
    producer.send(b"before")
    consumer.acknowledge(consumer.receive(10_000))
    return producer, consumer


def test_a_revoked_grant_stops_live_connections(world: World) -> None:
    with world.client("revokee") as client:
        producer, consumer = _working_pair(world, client, "revokee")
        world.call("DELETE", "/namespaces/acme/orders/permissions/revokee")
        started = time.monotonic()
        before = world.snapshot()
        with pytest.raises(sluice.AuthorizationError, match="produce to " + GRANTED):
            producer.send(b"after")
        with pytest.raises(sluice.AuthorizationError, match="consume from " + GRANTED):
            consumer.receive(2_000)
        assert time.monotonic() - started < 2.0
        assert world.snapshot() == before


def test_a_grant_revoked_behind_the_services_back_stops_within_seconds(world: World, db) -> None:
    """A revocation this admin service did not make (another replica's, say) is applied by
    its once-a-second reconciliation: within 2 s, as docs/security.md states."""
    world.call("POST", "/namespaces/acme/orders/permissions/elsewhere", ["produce"])
    with world.client("elsewhere") as client:
        producer = client.create_producer(GRANTED)
        producer.send(b"before")
        with db.begin() as connection:  # as another replica leaves the table
            connection.execute(text("DELETE FROM permission_grants WHERE role = 'elsewhere'"))
        started = time.monotonic()
        refused_after = None
        while time.monotonic() - started < 5:
            try:
                producer.send(b"still?")
            except sluice.AuthorizationError:
                refused_after = time.monotonic() - started
                break
            time.sleep(0.05)
        assert refused_after is not None and refused_after < 2.0, refused_after


def test_an_expired_token_ends_the_session(world: World) -> None:
    world.call("POST", "/namespaces/acme/orders/permissions/shortlived", ["produce"])
    client = world.client("shortlived", seconds=3)
    try:
        producer = client.create_producer(GRANTED)
        producer.send(b"while valid")
        user = client.redis.connection_pool.connection_kwargs["username"]
        assert world.users() & {user}
        deadline = time.monotonic() + 10
        while user in world.users() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert user not in world.users()
        before = world.snapshot()
        with pytest.raises(sluice.AuthenticationError, match="session has ended"):
            producer.send(b"after expiry")
        assert world.snapshot() == before
    finally:
        client.close()
    # A new client with the expired token is refused at once.
    with pytest.raises(sluice.AuthenticationError, match="Token expired"):
        world.client("shortlived", seconds=-1)


def test_a_token_supplier_with_a_new_token_reopens_an_ended_session(world: World) -> None:
    """The token expires and its session with it (Redis user deleted); once the supplier hands
    out a fresh token, the client opens a new session by itself and its producer and consumer
    go on, as a new Redis user."""
    world.call("POST", "/namespaces/acme/orders/permissions/refreshed", ["produce", "consume"])
    current = {"token": world.token("refreshed", seconds=3)}
    client = sluice.Client(
        world.url, authentication=sluice.AuthenticationToken(lambda: current["token"])
    )
    try:
        consumer = client.subscribe(GRANTED, "refreshed", consumer_type=sluice.ConsumerType.Shared)
        producer = client.create_producer(GRANTED)
        producer.send(b"first")
        assert consumer.receive(10_000).data() == b"first"
        first_user = client.redis.connection_pool.connection_kwargs["username"]
        deadline = time.monotonic() + 15
        while first_user in world.users() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert first_user not in world.users()  # ended with its token
        with pytest.raises(sluice.AuthenticationError):
            producer.send(b"while no token is valid")
        current["token"] = world.token("refreshed", seconds=120)
        sent_at = None
        deadline = time.monotonic() + 10
        while sent_at is None and time.monotonic() < deadline:
            try:
                producer.send(b"after the refresh")
                sent_at = time.monotonic()
            except sluice.AuthenticationError:
                time.sleep(0.2)
        assert sent_at is not None, "no new session within 10 s of the fresh token"
        second_user = client.redis.connection_pool.connection_kwargs["username"]
        assert second_user != first_user and second_user in world.users()
        assert consumer.receive(10_000).data() == b"after the refresh"
    finally:
        client.close()


def test_without_authentication_the_admin_url_gives_the_plain_redis_url(
    worker: WorkerThread, admin_server: ServerThread, namespace: str
) -> None:
    """``sluice.Client`` on the admin service's URL works with authentication off too: it is
    told the Redis URL and connects without a user of its own."""
    with sluice.Client(admin_server.url) as client:
        assert client.redis.connection_pool.connection_kwargs.get("username") is None
        topic = f"persistent://{namespace}/plain"
        consumer = client.subscribe(topic, "s")
        client.create_producer(topic).send(b"hello")
        assert consumer.receive(10_000).data() == b"hello"
    with pytest.raises(sluice.InvalidConfiguration, match="admin service's URL"):
        sluice.Client(
            admin_server.url.replace("http://", "redis://"),
            authentication=sluice.AuthenticationToken("t"),
        )


def test_sessions_survive_a_redis_restart(world: World) -> None:
    """Redis forgets the session users and the scripts when it restarts (the ACL file holds
    only the service users): the admin service re-creates the users from their records and
    loads the scripts again, and the client carries on with the same credentials."""
    with world.client("steady") as client:
        producer, consumer = _working_pair(world, client, "steady")
        user = client.redis.connection_pool.connection_kwargs["username"]
        assert world.server is not None
        world.server.stop()
        world.server.start()
        deadline = time.monotonic() + 10
        while user not in world.users() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert user in world.users()
        sent = None
        while sent is None and time.monotonic() < deadline:
            try:
                sent = producer.send(b"after")
            except (sluice.Timeout, sluice.ConnectError):
                time.sleep(0.2)
        assert sent is not None
        assert consumer.receive(30_000).data() == b"after"
    # Nothing written before the restart was lost: Redis replays its append-only file's
    # transactions as the default user, which is off but keeps its rights (dataplane.acl).
    log = keys.log(TopicName.from_full(GRANTED))
    assert b"before" in [fields[b"d"] for _id, fields in world.redis.xrange(log)]


def test_a_producer_alone_can_evict_by_priority_but_not_read(world: World) -> None:
    """Under ``lowest_priority_eviction`` a role with only ``produce`` sends into a full
    backlog (evicting the oldest lowest-priority message) and is refused when nothing lower
    waits; its credentials still read no entry."""
    topic = "persistent://acme/orders/evicting"
    path = "/persistent/acme/orders/evicting"
    world.call("PUT", path)
    quota = {"limitMessages": 2, "policy": "lowest_priority_eviction"}
    world.call("POST", path + "/backlogQuota", quota)
    world.call("POST", path + "/permissions/evictor", ["produce"])  # earlier tests revoke
    with world.client(ROOT) as root:
        root.subscribe(topic, "slow").close()
    with world.client("evictor") as client:
        producer = client.create_producer(topic, max_send_attempts=1)
        producer.send(b"low", priority=1)
        producer.send(b"mid", priority=5)
        producer.send(b"high", priority=9)  # evicts "low"
        with pytest.raises(sluice.ProducerBlockedQuotaExceededException):
            producer.send(b"lower", priority=2)
        raw = _raw(client)
        with pytest.raises(redis.exceptions.NoPermissionError):
            raw.xrange(keys.log(TopicName.from_full(topic)))
    name = TopicName.from_full(topic)
    streams = keys.level_logs(name, world.redis.hkeys(keys.levels(name)))
    kept = [f[b"d"] for stream in streams for _, f in world.redis.xrange(stream)]
    assert kept == [b"high", b"mid"]  # highest level first; "low" is gone from its stream


def test_level_streams_with_only_produce_or_only_consume(world: World) -> None:
    """A partition with priority level streams (``log:<L>``, docs/priority.md): a role with
    only ``produce`` sends every priority (making a level stream and the subscription's group
    on it) and reads no entry back; one with only ``consume`` receives them all and appends to
    no stream."""
    topic = "persistent://acme/orders/levelled"
    name = TopicName.from_full(topic)
    world.call("PUT", "/persistent/acme/orders/levelled")
    world.call("POST", "/namespaces/acme/orders/permissions/lv-producer", ["produce"])
    world.call("POST", "/namespaces/acme/orders/permissions/lv-consumer", ["consume"])
    with world.client(ROOT) as root:
        root.subscribe(topic, "lv", consumer_type=sluice.ConsumerType.Shared).close()
    with world.client("lv-producer") as client:
        producer = client.create_producer(topic, max_send_attempts=1)
        for body, priority in ((b"p2", 2), (b"p4", 4), (b"p7", 7)):
            producer.send(body, priority=priority)
        raw = _raw(client)
        for attack in (
            lambda: raw.xrange(keys.level_log(name, 7)),
            lambda: raw.xreadgroup("lv", "x", {keys.level_log(name, 7): "0"}),
            lambda: raw.xgroup_destroy(keys.level_log(name, 7), "lv"),
        ):
            with pytest.raises(redis.exceptions.NoPermissionError):
                attack()
        raw.close()
    assert sorted(world.redis.hkeys(keys.levels(name))) == [b"2", b"7"]
    groups = world.redis.xinfo_groups(keys.level_log(name, 7))
    assert [g["name"] for g in groups] == [b"lv"]
    with world.client("lv-consumer") as client:
        consumer = client.subscribe(topic, "lv", consumer_type=sluice.ConsumerType.Shared)
        received = []
        for _ in range(3):
            message = consumer.receive(10_000)
            consumer.acknowledge(message)
            received.append(message.data())
        assert received == [b"p7", b"p4", b"p2"]
        raw = _raw(client)
        for attack in (
            lambda: raw.xadd(keys.level_log(name, 7), {"d": b"forged"}),
            lambda: raw.hset(keys.levels(name), "9", "1-1"),
            lambda: raw.delete(keys.level_log(name, 2)),
        ):
            with pytest.raises(redis.exceptions.NoPermissionError):
                attack()
        raw.close()
        consumer.close()
    assert world.redis.xlen(keys.level_log(name, 7)) == 1
