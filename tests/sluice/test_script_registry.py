"""The script registry (``sluice.protocol.scripts``) against the Lua files it registers: one spec
per script, KEYS as each script's header lists them, the session users' scripts by action, no
Lua in Python files, and the fencing token read in one place."""

from __future__ import annotations

import re
from importlib import resources

from sluice.protocol import keys
from sluice.protocol.frames import DispatchArgs, holder_prefix, lease_holder
from sluice.protocol.names import TopicName
from sluice.protocol.scripts import (
    DISPATCH,
    LEASE_ACQUIRE,
    LEASE_FENCE,
    LEASE_RELEASE,
    SCRIPTS,
    STATS_READ,
    SUBSCRIBE,
    scripts_for,
)
from tests import ROOT

PRODUCT = ("api", "models", "workers", "dataplane", "server", "reports", "sluice")
PARTITION = TopicName("acme", "orders", "created").partition(3)
HEADER_KEY = re.compile(r"KEYS\[(\d+)\]")


def _header_keys(name: str) -> int:
    """How many KEYS a script's header comment names (0: a variadic layout)."""
    source = SCRIPTS[name].source
    header = [line for line in source.splitlines() if line.startswith("--")]
    return len({int(n) for line in header for n in HEADER_KEY.findall(line)})


def test_every_lua_file_has_one_spec() -> None:
    files = {
        path.name.removesuffix(".lua")
        for path in resources.files("sluice.protocol.lua").iterdir()
        if path.name.endswith(".lua")
    }
    assert files == set(SCRIPTS)
    assert len({spec.sha for spec in SCRIPTS.values()}) == len(SCRIPTS)


def test_each_layout_names_the_keys_its_header_lists() -> None:
    variadic = {LEASE_ACQUIRE.name, LEASE_RELEASE.name}
    for name, spec in SCRIPTS.items():
        expected = _header_keys(name)
        if name in variadic:
            assert expected == 0, name
        elif spec is SUBSCRIBE:  # and the optional subscribe counter
            assert len(spec.layout) + 1 == expected
        else:
            assert len(spec.layout) == expected, name
        if spec.layout and spec.layout[0].startswith("rg:"):  # a resource group's slot
            built = spec.keys(group="rg1")
            assert {keys.slot_of(key.split("{")[1].split("}")[0]) for key in built} == {
                keys.slot_of("rg:rg1")
            }, name
            continue
        built = spec.keys(PARTITION, "sub", "c1")
        assert len(built) == len(spec.layout)
        for key in built:
            assert key.startswith((keys.partition_prefix(PARTITION), keys.META)), (name, key)


def test_the_builders_fill_the_variable_parts() -> None:
    args = DispatchArgs(subscription="sub", queue_prefix="q:", now_ms=1)
    dispatch_keys, argv = DISPATCH.call(PARTITION, args)
    assert dispatch_keys[1] == keys.sub_key(PARTITION, "sub", "cursor")
    assert argv == args.argv()
    other = TopicName("acme", "orders", "created").partition(4)
    lease_keys, live = LEASE_ACQUIRE.call([PARTITION, other], "w1", ["w1", "w2"])
    assert lease_keys == [
        keys.lease(PARTITION),
        keys.lease_epoch(PARTITION),
        keys.lease(other),
        keys.lease_epoch(other),
    ]
    assert live == ["w1", "w1", "w2"]
    stats_keys, names = STATS_READ.call(PARTITION, ["a", "b"])
    assert len(stats_keys) == 2 + 3 * 2 and names == ["a", "b"]
    plain, _ = SUBSCRIBE.call(PARTITION, "sub", "c1", "Shared", "latest", 1, "{}", 1000)
    named, _ = SUBSCRIBE.call(
        PARTITION, "sub", "c1", "Shared", "latest", 1, "{}", 1000, "app", "10.0.0.1"
    )
    assert named == [*plain, keys.subscribe_counter(PARTITION, "app", "10.0.0.1")]


def test_session_users_call_only_the_clients_scripts() -> None:
    assert [s.name for s in scripts_for("produce")] == ["produce", "producer", "group_publish"]
    assert [s.name for s in scripts_for("consume")] == [
        "subscribe",
        "flow",
        "ack",
        "ack_cumulative",
        "nack",
        "release",
        "unsubscribe",
    ]


def test_the_fence_names_the_token_prefix_the_lease_holder_reads() -> None:
    token = "host-1:42:7"  # a worker id may hold ":" itself
    assert lease_holder(token) == "host-1:42"
    assert token.startswith(holder_prefix(lease_holder(token)))
    assert LEASE_FENCE.call(PARTITION, "host-1:42") == ([keys.lease(PARTITION)], ["host-1:42:"])


def test_no_lua_outside_the_lua_package() -> None:
    found = []
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "redis.call(" in path.read_text() or "redis.pcall(" in path.read_text():
                found.append(str(path.relative_to(ROOT)))
    assert found == []
