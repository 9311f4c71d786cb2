"""Subscription permissions on the data plane: a token-authenticated role with ``consume``
subscribes with a subscription name only when the namespace lists no roles for it, or lists
the role (super-users and the tenant's admin roles are not restricted); taking a role out of
the list refuses its next subscribe and closes its WebSocket consumers.  The secured
deployment of ``test_data_plane_acl`` (its ``world``), roles ``both`` and ``consumer``
granted ``consume`` on acme/orders."""

from __future__ import annotations

import time

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect as ws_connect

import sluice
from tests.workers.test_data_plane_acl import GRANTED, ROOT, World, world  # noqa: F401

LISTED = "/namespaces/acme/orders/permissions/subscription/"
REFUSED = "is not authorized to access subscription"
STANDALONE = {"allowedClusters": ["standalone"]}


def _subscribe_and_receive(world: World, client: sluice.Client, subscription: str) -> None:  # noqa: F811
    consumer = client.subscribe(GRANTED, subscription, consumer_type=sluice.ConsumerType.Shared)
    try:
        with world.client(ROOT) as root:
            root.create_producer(GRANTED).send(b"for-" + subscription.encode())
        consumer.acknowledge(consumer.receive(10_000))
    finally:
        consumer.close()


def _outcome(world: World, role: str, subscription: str) -> str:  # noqa: F811
    with world.client(role) as client:
        try:
            _subscribe_and_receive(world, client, subscription)
        except sluice.AuthorizationError as exc:
            assert REFUSED in str(exc) and subscription in str(exc), exc
            return "denied"
    return "ok"


def test_a_subscription_list_admits_only_its_roles(world: World) -> None:  # noqa: F811
    world.call("POST", LISTED + "payroll", ["consumer", "both"])
    try:
        assert _outcome(world, "consumer", "payroll") == "ok"
        assert _outcome(world, "both", "payroll") == "ok"
        world.call("DELETE", "/namespaces/acme/orders/permissions/payroll/both")
        before = world.snapshot()
        assert _outcome(world, "both", "payroll") == "denied"
        assert world.snapshot() == before  # refused before anything was written
        assert _outcome(world, "consumer", "payroll") == "ok"
        assert _outcome(world, ROOT, "payroll") == "ok"  # a super-user is not restricted
        # Nor is an admin role of the tenant.
        world.call("POST", "/tenants/acme", {"adminRoles": ["acme-admin"], **STANDALONE})
        try:
            assert _outcome(world, "acme-admin", "payroll") == "ok"
        finally:
            world.call("POST", "/tenants/acme", {"adminRoles": [], **STANDALONE})
        assert _outcome(world, "both", "unlisted") == "ok"  # no list: consume is enough
        # A role without consume is refused as before, whatever the list says.
        world.call("POST", LISTED + "payroll", ["producer"])
        with world.client("producer") as client, pytest.raises(sluice.AuthorizationError):
            client.subscribe(GRANTED, "payroll")
        # An emptied list restricts nothing again (Pulsar's rule).
        world.call("POST", LISTED + "payroll", [])
        assert _outcome(world, "both", "payroll") == "ok"
    finally:
        world.call("POST", LISTED + "payroll", [])


def _ws(world: World, role: str, subscription: str):  # noqa: F811
    path = f"/ws/v2/consumer/persistent/acme/orders/created/{subscription}?subscriptionType=Shared"
    url = world.url.replace("http://", "ws://") + path
    headers = {"Authorization": f"Bearer {world.token(role)}"}
    return ws_connect(url, additional_headers=headers, open_timeout=10)


def test_websocket_consumers_follow_the_list(world: World) -> None:  # noqa: F811
    world.call("POST", LISTED + "ws-listed", ["consumer", "both"])
    try:
        with _ws(world, "both", "ws-listed") as live:
            with _ws(world, "consumer", "ws-listed"):
                pass
            world.call("DELETE", "/namespaces/acme/orders/permissions/ws-listed/both")
            # The live consumer of the role taken out is closed (policy violation).
            deadline = time.monotonic() + 10
            closed = None
            while closed is None and time.monotonic() < deadline:
                try:
                    live.recv(timeout=0.5)
                except TimeoutError:
                    continue
                except ConnectionClosed as exc:
                    closed = exc
            assert closed is not None and closed.rcvd is not None
            assert closed.rcvd.code == 1008, closed.rcvd
        with pytest.raises(InvalidStatus) as refused:
            _ws(world, "both", "ws-listed")
        assert refused.value.response.status_code == 403
        with _ws(world, "consumer", "ws-listed"):
            pass
    finally:
        world.call("POST", LISTED + "ws-listed", [])
