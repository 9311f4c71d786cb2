"""What Redis's ACL checks cost the data plane: a session user against a service user.

One private ``redis-server`` with the ACL file of ``dataplane.acl``.  The same calls run as the
admin service's user (no selectors: the baseline, what a deployment without data-plane ACLs
does) and as session users (``dataplane.sessions``) whose role is granted the namespace, with
1 and with 50 grants (the granted namespace last, so every selector is tried):

* produce: ``produce.lua`` through ``EVALSHA``, one message per call, pipelined 100 at a time
  (the script's own commands are checked too);
* read: ``XRANGE`` of 100 entries, as a consumer reads what it was handed.

Figures are calls per second and the ratio to the baseline measured in the same run.

    python -m bench.acl_overhead [--quick]
"""

from __future__ import annotations

import asyncio
import secrets
import tempfile
import time
from pathlib import Path

import redis

from bench.harness import arguments, report
from dataplane.acl import SERVICE_USERS, Scope, render_acl_file, script_sha
from dataplane.sessions import Sessions
from server.embedded_redis import EmbeddedRedis
from sluice.protocol import keys
from sluice.protocol.connection import connect_async
from sluice.protocol.names import TopicName
from sluice.protocol.scripts import PRODUCE_SCRIPT
from sluice.protocol.urls import with_credentials

PARTITION = TopicName.from_full("persistent://bench/granted/t")
BATCH = 100


def session_url(plain: str, admin_url: str, grants: int) -> str:
    """A session user granted produce and consume on ``bench/granted`` (the last of
    ``grants`` namespace grants)."""
    scopes = [(Scope("bench", f"other-{i}"), frozenset({"produce"})) for i in range(grants - 1)]
    scopes.append((Scope("bench", "granted"), frozenset({"produce", "consume"})))

    async def issue() -> tuple[str, str]:
        client = connect_async(admin_url)

        async def source(roles):
            return {role: scopes for role in roles}

        issued = await Sessions(client, source, ttl_seconds=3600).issue("bench", None)
        await client.aclose()
        assert issued.password is not None
        return issued.user, issued.password

    user, password = asyncio.run(issue())
    return with_credentials(plain, user, password)


def produce_rate(client: redis.Redis, seconds: float) -> float:
    sha = script_sha("produce")
    args = [keys.WAKE_CHANNEL, "w", 1, 2, "t", "0", "d", b"x" * 64]
    script_keys = [keys.log(PARTITION), keys.partition_stats(PARTITION), keys.idle(PARTITION)]
    calls, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        pipe = client.pipeline(transaction=False)
        for _ in range(BATCH):
            pipe.evalsha(sha, len(script_keys), *script_keys, *args)
        pipe.execute()
        calls += BATCH
    return calls / (time.perf_counter() - started)


def read_rate(client: redis.Redis, seconds: float) -> float:
    log = keys.log(PARTITION)
    calls, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        pipe = client.pipeline(transaction=False)
        for _ in range(BATCH):
            pipe.xrange(log, "-", "+", count=100)
        pipe.execute()
        calls += BATCH
    return calls / (time.perf_counter() - started)


def main() -> None:
    args = arguments(__doc__ or "")
    seconds = 1.0 if args.quick else 5.0
    rounds = 1 if args.quick else 3
    folder = Path(tempfile.mkdtemp(prefix="sluice-acl-bench-"))
    passwords = {service: secrets.token_urlsafe(16) for service in SERVICE_USERS}
    (folder / "users.acl").write_text(render_acl_file(passwords))
    server = EmbeddedRedis(
        folder / "data",
        acl_file=folder / "users.acl",
        username=SERVICE_USERS["api"],
        password=passwords["api"],
    ).start()
    try:
        plain = f"redis://127.0.0.1:{server.port}/0"
        admin = redis.Redis.from_url(server.url)
        admin.script_load(PRODUCE_SCRIPT.source)
        users = {
            "service user (baseline)": server.url,
            "session, 1 grant": session_url(plain, server.url, 1),
            "session, 50 grants": session_url(plain, server.url, 50),
        }
        clients = {name: redis.Redis.from_url(url) for name, url in users.items()}
        best: dict[str, tuple[float, float]] = {name: (0.0, 0.0) for name in users}
        for _ in range(rounds):  # interleaved, so a busy moment does not favour one user
            for name, client in clients.items():
                produced, read = produce_rate(client, seconds), read_rate(client, seconds)
                best[name] = (max(best[name][0], produced), max(best[name][1], read))
        base_produce, base_read = best["service user (baseline)"]
        rows = [
            {
                "user": name,
                "produce calls/s": produced,
                "produce ratio": produced / base_produce,
                "XRANGE calls/s": read,
                "XRANGE ratio": read / base_read,
            }
            for name, (produced, read) in best.items()
        ]
        report("Data-plane ACL overhead (best of rounds)", rows, args.json)
        for client in clients.values():
            client.close()
        admin.close()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
