"""Data-plane sessions on a 3-master Redis Cluster: the session user exists on every master
(each node has its own ACL), a granted client produces and consumes across partitions that
live on different masters, and the credentials it received are refused elsewhere on every
node."""

from __future__ import annotations

import time
from urllib.parse import urlsplit

import httpx
import pytest
import redis
from redis.cluster import RedisCluster

import sluice
from api.app import create_app
from models.settings import Settings
from models.tokens import create_secret_key, create_token
from sluice.protocol import keys
from sluice.protocol.names import TopicName
from tests.conftest import ServerThread, truncate
from tests.workers.conftest import ADMIN, WorkerThread

pytestmark = pytest.mark.cluster
TOPIC = "persistent://acme/orders/spread"
SECRET = "persistent://globex/secret/t"


def test_sessions_on_a_cluster(settings: Settings, db, redis_server, tmp_path) -> None:
    secret = create_secret_key()
    (tmp_path / "secret.key").write_bytes(secret)
    secure = settings.model_copy(
        update={
            "authentication_enabled": True,
            "authorization_enabled": True,
            "super_user_roles": "root",
            "token_secret_key_file": str(tmp_path / "secret.key"),
        }
    )
    truncate(db)
    redis_server.flushall()
    api = ServerThread(create_app(secure)).start()
    worker = WorkerThread(
        secure.model_copy(update={"worker_http_port": 0, "worker_id": "acl-cluster"})
    ).start()

    def token(role: str) -> str:
        return create_token(subject=role, secret_key=secret)

    root = {"Authorization": f"Bearer {token('root')}"}
    try:
        with httpx.Client(base_url=api.url + ADMIN, headers=root, timeout=30) as http:
            for tenant in ("acme", "globex"):
                body = {"allowedClusters": ["standalone"]}
                assert http.put(f"/tenants/{tenant}", json=body).status_code == 204
            for namespace in ("acme/orders", "globex/secret"):
                assert http.put(f"/namespaces/{namespace}").status_code == 204
            path = "/persistent/acme/orders/spread/partitions"
            assert http.put(path, json=6).status_code == 204
            path = "/namespaces/acme/orders/permissions/billing"
            assert http.post(path, json=["produce", "consume"]).status_code == 204
        with sluice.Client(api.url, authentication=sluice.AuthenticationToken(token("root"))) as c:
            c.create_producer(SECRET).send(b"secret")

        with sluice.Client(
            api.url, authentication=sluice.AuthenticationToken(token("billing"))
        ) as client:
            assert client.cluster
            issued = urlsplit(client.redis_url)
            user, password = issued.username, issued.password
            for node in redis_server.master_nodes():
                assert user in {u.decode() for u in node.redis().execute_command("ACL", "USERS")}
            consumer = client.subscribe(TOPIC, "s", consumer_type=sluice.ConsumerType.Shared)
            producer = client.create_producer(TOPIC)
            for i in range(60):
                producer.send(b"%d" % i)
            got = set()
            deadline = time.monotonic() + 30
            while len(got) < 60 and time.monotonic() < deadline:
                message = consumer.receive(10_000)
                consumer.acknowledge(message)
                got.add(message.data())
            assert len(got) == 60
            owners = {
                redis_server.node_of_key(keys.log(TopicName.from_full(TOPIC).partition(i))).port
                for i in range(6)
            }
            assert len(owners) == 3  # the partitions live on every master
            with pytest.raises(sluice.AuthorizationError, match=f"produce to {SECRET}"):
                client.create_producer(SECRET)

            raw = RedisCluster.from_url(client.redis_url)
            log = keys.log(TopicName.from_full(SECRET))
            for attack in (
                lambda: raw.xrange(log),
                lambda: raw.delete(log),
                lambda: raw.xadd(log, {"d": b"forged"}),
            ):
                with pytest.raises(redis.exceptions.NoPermissionError):
                    attack()
            for node in redis_server.master_nodes():
                direct = redis.Redis(
                    port=node.port,
                    username=user,
                    password=password,
                )
                with pytest.raises(redis.exceptions.NoPermissionError):
                    direct.flushall()
                direct.close()
            raw.close()
    finally:
        worker.stop()
        api.stop()
