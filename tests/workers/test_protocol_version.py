"""The data-plane protocol version (``sluice.protocol.version``): a component older than the
deployment says so and stops, instead of half-working beside a newer release.

A newer release is played by writing what its announcement would leave in Redis
(``protocolOldest`` / ``protocolNewest`` in ``sl:{meta}:config``): one that still works beside
this release raises only ``protocolNewest``; one that drops this release's protocol raises
``protocolOldest`` above it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

import sluice
from server.embedded_redis import free_port
from sluice.protocol import keys
from sluice.protocol.version import OLDEST_PEER, PROTOCOL
from tests.fleet import ROOT
from tests.workers.conftest import ADMIN, wait_until

TOPIC = "persistent://acme/orders/versions"
TOO_OLD = (
    f"speaks data-plane protocol {PROTOCOL}, but this deployment requires protocol "
    f"{PROTOCOL + 1} or newer"
)


def newer_release(fleet, *, drops_this_one: bool) -> None:
    fields = {"protocolNewest": PROTOCOL + 1}
    if drops_this_one:
        fields["protocolOldest"] = PROTOCOL + 1
    fleet.redis.hset(keys.CLIENT_CONFIG, mapping=fields)


def test_workers_announce_what_they_speak(fleet):
    fleet.start("w1")
    stored = fleet.redis.hmget(keys.CLIENT_CONFIG, "protocolOldest", "protocolNewest")
    assert stored == [str(OLDEST_PEER).encode(), str(PROTOCOL).encode()]


def test_a_compatible_newer_release_leaves_this_one_running(fleet, http, settings):
    assert http.put(f"{ADMIN}/persistent/acme/orders/versions").status_code == 204
    fleet.start("w1")
    newer_release(fleet, drops_this_one=False)
    fleet.start("w2")  # starts beside it, and keeps the newer one's mark
    assert fleet.redis.hget(keys.CLIENT_CONFIG, "protocolNewest") == str(PROTOCOL + 1).encode()
    time.sleep(6)  # past a turn of the workers' protocol watch
    assert fleet.processes["w1"].poll() is None and fleet.processes["w2"].poll() is None
    with sluice.Client(settings.redis_url) as client:
        consumer = client.subscribe(TOPIC, "s")
        client.create_producer(TOPIC).send(b"still works")
        assert consumer.receive(timeout_millis=10_000).data() == b"still works"


def test_a_worker_too_old_for_the_deployment_stops_and_says_why(fleet, http):
    assert http.put(f"{ADMIN}/persistent/acme/orders/versions").status_code == 204
    fleet.start_settled(TOPIC, 0, "w1")
    newer_release(fleet, drops_this_one=True)
    # The running worker stops within a turn of its watch (5 s), with an error, and gives its
    # lease up on the way out.
    code = wait_until(lambda: fleet.processes["w1"].poll(), timeout=20, every=0.1)
    assert code != 0
    assert TOO_OLD in fleet.log("w1")
    assert fleet.owners(TOPIC, 0) == {TOPIC: None}
    # Started again, it refuses at once instead of retrying.
    again = fleet.start("w2", wait=False)
    assert again.wait(60) != 0
    assert TOO_OLD in fleet.log("w2")
    assert "w2" not in fleet.live()
    # Nothing it wrote lowered the deployment's marks.
    assert fleet.redis.hget(keys.CLIENT_CONFIG, "protocolOldest") == str(PROTOCOL + 1).encode()


def test_a_client_too_old_for_the_deployment_is_refused_clearly(fleet, settings):
    newer_release(fleet, drops_this_one=True)
    with sluice.Client(settings.redis_url) as client:
        with pytest.raises(sluice.UnsupportedVersionError, match=TOO_OLD) as refused:
            client.create_producer(TOPIC)
        assert "upgrade client" in str(refused.value)
        with pytest.raises(sluice.UnsupportedVersionError):
            client.subscribe(TOPIC, "s")


def test_an_admin_service_too_old_for_the_deployment_does_not_start(fleet, settings, tmp_path):
    newer_release(fleet, drops_this_one=True)
    env = {
        **os.environ,
        "DATABASE_URL": settings.database_url,
        "REDIS_URL": settings.redis_url,
    }
    done = subprocess.run(
        [sys.executable, "-m", "server.cli", "api", "--port", str(free_port())],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "this admin service " + TOO_OLD in done.stdout + done.stderr
