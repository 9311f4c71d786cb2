"""A stats read over a deep backlog whose lag Redis cannot tell: latency and Redis blocking.

A partition of 1,000,000 entries (256-byte payloads) and a subscription whose consumer group
sits on its second entry with an unknown entries-read counter (as after a group was created
or moved at an explicit id): Redis answers its ``lag`` as nil, so ``read_backlogs`` (what
``GET .../stats`` and the workers' documents use) must count the undelivered entries.

Measured, over a few rounds (the counter made unknown again before each):

* the read's latency (``read_backlogs``, first read after the counter became unknown, and a
  second read, which Redis answers from the repaired counter);
* the longest single Redis command during the read (SLOWLOG, every command logged): how long
  Redis served no one else; and the median script call, which a busy machine stretches less;
* the worst PING round trip of a second client pinging in a loop during the read.

As a reference the same run times one unbounded count (``XRANGE`` over the whole backlog in
one script call, what counting in one call costs).

    python -m bench.backlog_read [--quick]
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import threading
import time
from pathlib import Path

import redis

from bench.harness import arguments, percentile, report
from dataplane.backlog import read_backlogs
from dataplane.scripts import register_scripts
from server.embedded_redis import EmbeddedRedis
from sluice.protocol import keys
from sluice.protocol.connection import connect, connect_async
from sluice.protocol.names import TopicName

PARTITION = TopicName.from_full("persistent://bench/backlog/deep")
GROUP = "deep"
SCRIPT_CALLS = ("EVAL", "EVALSHA")
PAYLOAD = os.urandom(128).hex().encode()  # 256 bytes
ONE_CALL_COUNT = """
local n, from = 0, '(' .. ARGV[1]
while true do
  local got = redis.call('XRANGE', KEYS[1], from, '+', 'COUNT', 1000)
  n = n + #got
  if #got < 1000 then return n end
  from = '(' .. got[#got][1]
end
"""


def fill(client: redis.Redis, stream: str, entries: int) -> str:
    """``entries`` entries in ``stream``; the id of the second one."""
    batch = 10_000
    for start in range(0, entries, batch):
        pipe = client.pipeline(transaction=False)
        for _ in range(min(batch, entries - start)):
            pipe.xadd(stream, {"d": PAYLOAD})
        pipe.execute()
    second = client.xrange(stream, count=2)[1][0]
    return second.decode()


class Pinger:
    """A second client pinging in a loop; the worst round trip while it ran."""

    def __init__(self, url: str) -> None:
        self.client = connect(url)
        self.worst = 0.0
        self.count = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            start = time.perf_counter()
            self.client.ping()
            self.worst = max(self.worst, time.perf_counter() - start)
            self.count += 1

    def __enter__(self) -> Pinger:
        self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._stop.set()
        self._thread.join()
        self.client.close()


def longest_command(client: redis.Redis) -> tuple[float, str, float]:
    """The slowest command SLOWLOG recorded since the last reset (ms, name), and the median
    script call (ms): what one call costs when the machine's other work does not stretch it."""
    entries = client.slowlog_get(100_000)
    if not entries:
        return 0.0, "", 0.0
    top = max(entries, key=lambda e: e["duration"])
    name = _name(top["command"])
    scripts = [e["duration"] / 1000 for e in entries if _name(e["command"]) in SCRIPT_CALLS]
    return top["duration"] / 1000, name, percentile(scripts, 0.5)


def _name(command: bytes | str) -> str:
    text = command.decode(errors="replace") if isinstance(command, bytes) else str(command)
    return text.split(" ")[0].upper()


async def read(url: str) -> tuple[int, float]:
    """One ``read_backlogs`` of the partition: (backlog, seconds)."""
    client = connect_async(url)
    try:
        scripts = register_scripts(client)
        start = time.perf_counter()
        answer = await read_backlogs(client, scripts, [PARTITION])
        elapsed = time.perf_counter() - start
    finally:
        await client.aclose()
    return answer[PARTITION.full][GROUP].entries, elapsed


def main() -> None:
    args = arguments(__doc__.splitlines()[0])
    entries = 100_000 if args.quick else 1_000_000
    rounds = 2 if args.quick else 3
    with tempfile.TemporaryDirectory(prefix="sluice-bench-") as tmp:
        server = EmbeddedRedis(Path(tmp) / "redis").start()
        try:
            client = connect(server.url)
            stream = keys.log(PARTITION)
            second = fill(client, stream, entries)
            client.xgroup_create(stream, GROUP, id=second)
            expected = entries - 2
            client.config_set("slowlog-log-slower-than", 0)
            client.config_set("slowlog-max-len", 100_000)
            rows = []
            for _ in range(rounds):
                client.execute_command("XGROUP", "SETID", stream, GROUP, second)  # lag unknown
                assert client.xinfo_groups(stream)[0]["lag"] is None
                client.slowlog_reset()
                with Pinger(server.url) as pinger:
                    backlog, first = asyncio.run(read(server.url))
                longest, name, median = longest_command(client)
                assert backlog == expected, (backlog, expected)
                again_backlog, again = asyncio.run(read(server.url))
                assert again_backlog == expected
                rows.append(
                    {
                        "what": "read_backlogs, lag unknown",
                        "backlog": backlog,
                        "read ms": first * 1000,
                        "next read ms": again * 1000,
                        "longest command ms": longest,
                        "longest command": name,
                        "median script call ms": median,
                        "worst PING ms": pinger.worst * 1000,
                        "PINGs": pinger.count,
                    }
                )
            client.slowlog_reset()
            with Pinger(server.url) as pinger:
                start = time.perf_counter()
                counted = client.eval(ONE_CALL_COUNT, 1, stream, second)
                elapsed = time.perf_counter() - start
            longest, name, median = longest_command(client)
            rows.append(
                {
                    "what": "reference: one unbounded count",
                    "backlog": counted,
                    "read ms": elapsed * 1000,
                    "next read ms": float("nan"),
                    "longest command ms": longest,
                    "longest command": name,
                    "median script call ms": median,
                    "worst PING ms": pinger.worst * 1000,
                    "PINGs": pinger.count,
                }
            )
            client.close()
        finally:
            server.stop()
    report(f"Stats read over a {entries:,}-entry backlog, lag unknown", rows, args.json)


if __name__ == "__main__":
    main()
