"""Pulsar's WebSocket API from a non-Python client: Node.js with the npm package ``ws``.

``tests/node/ws_roundtrip.mjs`` subscribes, produces through ``/ws/v2/producer``, consumes
through ``/ws/v2/consumer`` and acknowledges every message by its ``messageId``; this test runs
it with ``node`` against the test's admin service and checks what it printed and what the
REST API says afterwards. ``make test`` installs ``ws`` (``npm ci`` in ``tests/node``, from
its package-lock.json); without node or ``ws`` the test fails and says so.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.workers.conftest import ADMIN

NODE_DIR = Path(__file__).resolve().parents[1] / "node"
SCRIPT = NODE_DIR / "ws_roundtrip.mjs"
TOPIC_PATH = "persistent/acme/orders/ws-node"
COUNT = 20
HOW_TO = "run `make test` (it installs Node.js and npm, then `npm ci` in tests/node)"


def node() -> str:
    """The node executable, 18 or newer, with ``ws`` installed; fails (not skips) otherwise."""
    found = shutil.which("node")
    if found is None:
        pytest.fail(f"node is not installed: {HOW_TO}")
    version = subprocess.run(
        [found, "--version"], capture_output=True, text=True, timeout=30
    ).stdout.strip()
    if int(version.lstrip("v").split(".")[0]) < 18:
        pytest.fail(f"node is {version}, the test needs 18 or newer: {HOW_TO}")
    if not (NODE_DIR / "node_modules" / "ws" / "package.json").is_file():
        pytest.fail(f"the npm package ws is not installed in {NODE_DIR}: {HOW_TO}")
    return found


def test_a_node_client_produces_consumes_and_acknowledges(admin_server, http, namespace, worker):
    executable = node()
    base = admin_server.url.replace("http://", "ws://")
    done = subprocess.run(
        [executable, str(SCRIPT), base, TOPIC_PATH, "sub", str(COUNT)],
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)

    assert result["errors"] == []
    assert [s["context"] for s in result["sent"]] == [f"c{i}" for i in range(COUNT)]
    ids = [s["messageId"] for s in result["sent"]]
    assert len(set(ids)) == COUNT and all(ids)
    got = result["received"]
    assert [m["payload"] for m in got] == [f"node-{i}" for i in range(COUNT)]  # in order
    assert [m["messageId"] for m in got] == ids
    assert [m["properties"] for m in got] == [
        {"client": "node", "index": str(i)} for i in range(COUNT)
    ]
    assert all(m["redeliveryCount"] == 0 for m in got)
    assert result["acked"] == COUNT

    # Every acknowledgement arrived: nothing is left for the subscription, nothing unacked.
    def subscription() -> dict:
        return http.get(f"{ADMIN}/{TOPIC_PATH}/stats").json()["subscriptions"]["sub"]

    deadline = time.monotonic() + 10
    stats = subscription()
    while (stats["msgBacklog"] or stats["unackedMessages"]) and time.monotonic() < deadline:
        time.sleep(0.1)
        stats = subscription()
    assert stats["msgBacklog"] == 0 and stats["unackedMessages"] == 0, stats
    # Counters come from the owning worker's stats document, published every second (the
    # backlog above is read live): wait for the document that has them all.
    counted = http.get(f"{ADMIN}/{TOPIC_PATH}/stats").json()["msgInCounter"]
    while counted != COUNT and time.monotonic() < deadline + 3:
        time.sleep(0.1)
        counted = http.get(f"{ADMIN}/{TOPIC_PATH}/stats").json()["msgInCounter"]
    assert counted == COUNT
