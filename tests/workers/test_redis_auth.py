"""Redis with a password, an ACL user, and TLS: the worker and the client connect through
credentials in the URL; a wrong password fails with a clear reason that hides the secret."""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

import sluice
from models.settings import Settings
from server.embedded_redis import EmbeddedRedis, TlsFiles
from sluice.protocol import keys
from tests.workers.conftest import ADMIN, WorkerThread, drain, wait_until

PASSWORD = "p@ss:w/rd%"  # characters that must be quoted in a URL
TOPIC = "persistent://acme/orders/secured"


def _pem(key) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def make_tls_files(folder: Path) -> TlsFiles:
    """A throw-away CA and a server certificate for 127.0.0.1 signed by it."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key, server_key = (
        ec.generate_private_key(ec.SECP256R1()),
        ec.generate_private_key(ec.SECP256R1()),
    )
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sluice test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    server = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    folder.mkdir(parents=True, exist_ok=True)
    files = TlsFiles(folder / "server.crt", folder / "server.key", folder / "ca.crt")
    files.cert.write_bytes(server.public_bytes(serialization.Encoding.PEM))
    files.key.write_bytes(_pem(server_key))
    files.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    return files


@pytest.fixture(params=["requirepass", "acl-user", "tls-acl-user"])
def secured_redis(request, tmp_path) -> Iterator[EmbeddedRedis]:
    options: dict = {"password": PASSWORD}
    if request.param != "requirepass":
        options["username"] = "sluice-worker"
    if request.param.startswith("tls"):
        options["tls"] = make_tls_files(tmp_path / "tls")
    server = EmbeddedRedis(tmp_path / "redis", **options).start()
    yield server
    server.stop()


def test_worker_and_client_use_the_credentials_in_the_url(
    http, namespace, worker_settings: Settings, secured_redis: EmbeddedRedis
):
    url = secured_redis.url
    assert url.startswith("rediss://" if secured_redis.tls else "redis://")
    assert "p%40ss%3Aw%2Frd%25@" in url
    assert http.put(f"{ADMIN}/persistent/acme/orders/secured").status_code == 204
    worker = WorkerThread(worker_settings.model_copy(update={"redis_url": url})).start()
    try:
        # The worker reports ready before its wake-up listener has subscribed; a wake-up sent
        # in between is lost (seen as an occasional stall), so wait for the listener.
        wait_until(lambda: worker.call(lambda w: w.redis.pubsub_numsub(keys.WAKE_CHANNEL))[0][1])
        with sluice.Client(url) as client:
            consumer = client.subscribe(TOPIC, "sub")
            producer = client.create_producer(TOPIC)
            for i in range(5):
                producer.send(f"m{i}".encode())
            got = drain(consumer, 5, timeout=10)
            assert sorted(m.data() for _, m in got) == [f"m{i}".encode() for i in range(5)]
    finally:
        worker.stop()


@pytest.mark.parametrize("kind", ["wrong-password", "no-password"])
def test_a_wrong_password_is_refused_clearly(tmp_path, kind):
    with EmbeddedRedis(tmp_path / "redis", password=PASSWORD, username="app") as server:
        base = f"127.0.0.1:{server.port}/0"
        url = f"redis://app:not-it@{base}" if kind == "wrong-password" else f"redis://{base}"
        with pytest.raises(sluice.ConnectError) as caught:
            sluice.Client(url)
        message = str(caught.value)
        assert message.startswith("authentication failed at redis://")
        assert "not-it" not in message
        assert "check the user and password" in message


def test_celery_accepts_the_same_urls(secured_redis: EmbeddedRedis):
    from celery import Celery

    app = Celery("sluice-test", broker=secured_redis.url, backend=secured_redis.url)
    with app.connection_for_write() as connection:
        connection.ensure_connection(max_retries=3)
        channel = connection.default_channel
        channel.client.set("celery-probe", b"1")
        assert channel.client.get("celery-probe") == b"1"
    assert app.backend.client.ping()
    app.close()
