"""``sluice standalone`` with authentication and authorization on, as a user runs it: its
embedded Redis refuses anonymous connections, a role granted one namespace produces and
consumes there through a client that connects with its token, and neither the client nor a
program holding the Redis credentials it received can reach another tenant or administer
Redis."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

import sluice
from tests.standalone_process import ROOT, Standalone


def _token(key: Path, role: str) -> str:
    command = [sys.executable, "-m", "server.cli", "tokens", "create"]
    command += ["--secret-key", f"file:{key}", "--subject", role]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Standalone, Path]]:
    folder = tmp_path_factory.mktemp("secured-standalone")
    key = folder / "secret.key"
    subprocess.run(
        [sys.executable, "-m", "server.cli", "tokens", "create-secret-key", "-o", str(key)],
        cwd=ROOT,
        check=True,
    )
    env = {
        "SLUICE_AUTHENTICATION_ENABLED": "true",
        "SLUICE_AUTHORIZATION_ENABLED": "true",
        "SLUICE_SUPER_USER_ROLES": "admin",
        "SLUICE_TOKEN_SECRET_KEY_FILE": str(key),
    }
    server = Standalone(folder, "--no-reports", env=env).start()
    try:
        yield server, key
    finally:
        server.interrupt()


def test_a_granted_role_works_and_is_isolated(secured: tuple[Standalone, Path]) -> None:
    server, key = secured
    admin = {"Authorization": f"Bearer {_token(key, 'admin').strip()}"}
    with httpx.Client(base_url=server.url + "/admin/v2", headers=admin, timeout=30) as http:
        for tenant in ("acme", "globex"):
            body = {"allowedClusters": ["standalone"]}
            assert http.put(f"/tenants/{tenant}", json=body).status_code == 204
        for namespace in ("acme/orders", "globex/secret"):
            assert http.put(f"/namespaces/{namespace}").status_code == 204
        grant = http.post(
            "/namespaces/acme/orders/permissions/billing", json=["produce", "consume"]
        )
        assert grant.status_code == 204
        assert http.get("/namespaces/acme/orders/permissions").json() == {
            "billing": ["consume", "produce"]
        }
    secret_topic = "persistent://globex/secret/ledger"
    with sluice.Client(
        server.url, authentication=sluice.AuthenticationToken(_token(key, "admin").strip())
    ) as root:
        root.subscribe(secret_topic, "books").close()
        root.create_producer(secret_topic).send(b"the books")

    token = sluice.AuthenticationToken(_token(key, "billing").strip())
    with sluice.Client(server.url, authentication=token) as client:
        topic = "persistent://acme/orders/created"
        consumer = client.subscribe(topic, "audit")
        client.create_producer(topic).send(b"order 1")
        message = consumer.receive(10_000)
        assert message.data() == b"order 1"
        consumer.acknowledge(message)
        with pytest.raises(sluice.AuthorizationError, match=f"produce to {secret_topic}"):
            client.create_producer(secret_topic)
        with pytest.raises(sluice.AuthorizationError, match=f"consume from {secret_topic}"):
            client.subscribe(secret_topic, "books")
        # A topic nobody created yet: the admin service's lookup refuses it, as named.
        unknown = "persistent://globex/secret/not-yet"
        with pytest.raises(sluice.AuthorizationError, match=f"produce to {unknown}"):
            client.create_producer(unknown)
        with pytest.raises(sluice.AuthorizationError, match=f"consume from {unknown}"):
            client.subscribe(unknown, "books")

        assert "sl-session-" in client.redis_url
        raw = redis.Redis.from_url(client.redis_url)
        log = "sl:{globex/secret/ledger}:log"
        for attack in (
            lambda: raw.xrange(log),
            lambda: raw.xreadgroup("books", "me", {log: "0"}),
            lambda: raw.xack(log, "books", "0-1"),
            lambda: raw.delete(log),
            raw.flushall,
            lambda: raw.config_get("*"),
            lambda: raw.keys("*"),
            lambda: raw.acl_setuser("me-too", enabled=True),
        ):
            with pytest.raises(redis.exceptions.NoPermissionError):
                attack()
        raw.close()

    anonymous = redis.Redis(port=server.redis_port)
    with pytest.raises(redis.exceptions.AuthenticationError):
        anonymous.ping()
    anonymous.close()
    # The other tenant's message is still there, unread by anyone but its subscription.
    with sluice.Client(
        server.url, authentication=sluice.AuthenticationToken(_token(key, "admin").strip())
    ) as root:
        books = root.subscribe(secret_topic, "books")
        assert books.receive(10_000).data() == b"the books"
        books.close()
