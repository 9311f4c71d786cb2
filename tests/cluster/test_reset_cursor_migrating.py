"""``reset_cursor.lua`` while a Redis Cluster migrates the partition's slot: a call that
cannot reach every key it touches fails as a whole, before it writes anything, as
``dispatch.lua`` does (its receiver queues and dormant flag are not among its KEYS, so
Redis cannot check them up front)."""

from __future__ import annotations

import pytest
import redis

from server.embedded_cluster import EmbeddedCluster
from sluice.protocol import keys
from sluice.protocol.names import TopicName
from sluice.protocol.scripts import RESET_CURSOR

PARTITION = TopicName.from_full("persistent://acme/orders/moving")
GROUP = "audit"


def node_id(client: redis.Redis) -> str:
    return client.execute_command("CLUSTER MYID").decode()


def group_state(client: redis.Redis) -> tuple[bytes, bytes | None]:
    [group] = client.xinfo_groups(keys.log(PARTITION))
    return group["last-delivered-id"], client.get(RESET_CURSOR.keys(PARTITION, GROUP)[2])


def test_a_reset_during_a_slot_migration_fails_whole_then_succeeds(
    redis_cluster: EmbeddedCluster,
):
    log = keys.log(PARTITION)
    source = redis_cluster.node_of_key(log)
    target = next(n for n in redis_cluster.master_nodes() if n.port != source.port)
    here, there = source.redis(), target.redis()
    for _ in range(3):
        here.xadd(log, {"n": "1", "d": "x"})
    here.xgroup_create(log, GROUP, id="0")
    script_keys, args = RESET_CURSOR.call(PARTITION, GROUP, "$", "$", 0)
    here.sadd(script_keys[1], GROUP)
    here.set(script_keys[2], "0-0")
    here.zadd(script_keys[3], {"0-1": 1})
    here.hset(script_keys[4], "c1", 10)  # a consumer whose receiver queue is empty (absent)
    here.set(script_keys[5], "1")
    here.set(script_keys[6], "1")
    # Every KEYS entry exists here, so Redis lets the call start: only the receiver queue,
    # which is not among KEYS, is missing from the migrating slot.
    before = group_state(here)
    slot = int(here.execute_command("CLUSTER KEYSLOT", log))
    sha = here.script_load(RESET_CURSOR.source)
    here.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", node_id(there))
    there.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", node_id(here))
    try:
        with pytest.raises(redis.ResponseError, match="non local key"):
            here.evalsha(sha, len(script_keys), *script_keys, *args)
        assert group_state(here) == before  # nothing written: the group and cursor as they were
    finally:
        for client in (here, there):
            client.execute_command("CLUSTER SETSLOT", slot, "STABLE")
    reply = here.evalsha(sha, len(script_keys), *script_keys, *args)
    assert reply[0] == 0  # nothing after the end of the stream to deliver
    last = here.xrevrange(log, count=1)[0][0]
    assert group_state(here) == (last, last)
