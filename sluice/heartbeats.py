"""The heartbeats of one client's consumers, sent together.

A consumer renews its registration on every partition it reads (``flow.lua`` with no
permits) once per heartbeat interval.  One job of the client's background thread does it for
all of them, in pipelines of at most ``BATCH`` calls: a client holding thousands of consumers
pays a few round trips per interval, not one per consumer and partition (each a wake-up of
the thread and a wait for Redis).  A consumer the workers reaped after missed heartbeats (its
call answers 0) registers again, under its membership lock, unless it is closing or
unsubscribing meanwhile (``Consumer._beaten``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError
from redis.exceptions import TimeoutError as RedisTimeoutError

from sluice.durable import TOPOLOGY_ERRORS
from sluice.protocol.scripts import FLOW

if TYPE_CHECKING:
    from sluice.client import Client
    from sluice.consumer import Consumer
    from sluice.consumer_state import Part

BATCH = 1000  # calls per pipeline


def beat(client: Client, consumers: list[Consumer]) -> None:
    """Renew the registrations of ``consumers`` (all of ``client``) on all their partitions.
    A lost connection or a cluster changing its slots ends the round: the next one, an
    interval later, is well within the workers' consumer timeout."""
    calls = [(consumer, part) for consumer in consumers for part in consumer._beating_parts()]
    for start in range(0, len(calls), BATCH):
        batch = calls[start : start + BATCH]
        try:
            replies = _send(client, batch)
            again = [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
            if again:
                # A master without the scripts (a restart, a failover's new master).
                client.reload_scripts()
                resent = _send(client, [batch[i] for i in again])
                for i, reply in zip(again, resent, strict=True):
                    replies[i] = reply
        except (RedisConnectionError, RedisTimeoutError, *TOPOLOGY_ERRORS):
            return
        for (consumer, part), reply in zip(batch, replies, strict=True):
            consumer._beaten(part, reply)


def _send(client: Client, batch: list[tuple[Consumer, Part]]) -> list:
    """One pipeline of heartbeat calls; their replies (an error as its exception).  EVALSHA
    itself, as the acknowledgement flush does: a server without the script answers
    NOSCRIPT."""
    pipe = client.redis.pipeline(transaction=False)
    sha = client.scripts[FLOW.name].sha
    for consumer, part in batch:
        script_keys, args = consumer._flow_call(part, 0)
        pipe.evalsha(sha, len(script_keys), *script_keys, *args)
    return pipe.execute(raise_on_error=False)
