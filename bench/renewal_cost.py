"""Redis time per quota renewal: ``dispatch.lua`` calls as the renewal clock makes them.

Thousands of slow subscriptions (one message per period each) cost Redis one ``dispatch.lua``
call per subscription and period, made by the worker's renewal clock in runs of
``dispatch_many.lua``: a Shared subscription held back only by its own SUBSCRIPTION quota,
whose one call takes the whole quota (one entry).  This benchmark makes exactly those calls
on a private ``redis-server`` (partitions of ``--subs`` subscriptions with a backlog and one
consumer each, a lease and its fencing token, a limit of 1 message a second, the limiters'
clock stepped one period per round) and reads Redis's own accounting of them (``INFO
commandstats``: the time ``EVALSHA`` spent, divided by the dispatch calls its runs made).
Every call must hand out exactly one entry and end on its quota; the benchmark checks that.

``python -m bench.renewal_cost`` (about 10 s): runs of 1, 2 and 20 calls (the renewal clock
runs up to 32 a run), best of ``--repeats`` rounds of measurement each.  ``--against TREE``
measures the scripts of another checkout too (its ``sluice/protocol/lua``), round for round
on the same server and keys, so both see the same machine.
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
import uuid
from pathlib import Path

import redis

from server.embedded_redis import EmbeddedRedis
from sluice.protocol import keys
from sluice.protocol.frames import DispatchArgs, DispatchReason, DispatchResult, LimitArgs
from sluice.protocol.names import TopicName
from sluice.protocol.scripts import DISPATCH_MANY, FLOW, PRODUCE_SCRIPT, SCRIPTS, SUBSCRIBE

NOW_MS = 1_700_000_000_000
TOKEN = "w1:1:1"
LIMIT = LimitArgs(1, 0, 1, False)  # 1 message a second, no byte limit


def setup(client: redis.Redis, partitions: int, subs: int, backlog: int) -> list[TopicName]:
    """Partitions with a backlog, ``subs`` Shared subscriptions each with one consumer and
    plenty of permits, and a lease held with ``TOKEN``."""
    scripts = {name: client.register_script(s.source) for name in SCRIPTS for s in [SCRIPTS[name]]}
    names = []
    for _ in range(partitions):
        name = TopicName("t", "ns", f"renew-{uuid.uuid4().hex[:8]}")
        script_keys, args = PRODUCE_SCRIPT.call(name, [["d", b"x" * 100]] * backlog)
        scripts["produce"](keys=script_keys[:3], args=args)
        for s in range(subs):
            sub = f"sub-{s}"
            call = SUBSCRIBE.call(name, sub, "c1", "Shared", "earliest", NOW_MS, "{}", 60_000)
            scripts["subscribe"](keys=call[0], args=call[1])
            scripts["flow"](*FLOW.call(name, sub, "c1", 1_000_000, NOW_MS))
        client.set(keys.lease(name), TOKEN)
        names.append(name)
    return names


def renewal(name: TopicName, sub: str, clock_ms: float) -> DispatchArgs:
    """One call as the renewal clock makes it (a dispatcher's packed arguments)."""
    return DispatchArgs(
        subscription=sub,
        queue_prefix=keys.sub_prefix(name, sub) + "q:",
        now_ms=NOW_MS,
        clock_ms=clock_ms,
        fencing_token=TOKEN,
        sub=LIMIT,
        delay_margin_ms=1000,
    )


def tree_source(tree: str) -> str:
    """``dispatch_many.lua`` of another checkout, its includes expanded."""
    folder = Path(tree) / "sluice" / "protocol" / "lua"
    include = re.compile(r"^-- include ((?:lib/)?[a-z_]+\.lua)$", re.MULTILINE)

    def expanded(name: str) -> str:
        return include.sub(lambda line: expanded(line.group(1)), (folder / name).read_text())

    return expanded("dispatch_many.lua")


def evalsha_usec(client: redis.Redis) -> tuple[int, int]:
    stats = client.info("commandstats").get("cmdstat_evalsha", {})
    return int(stats.get("calls", 0)), int(stats.get("usec", 0))


def measure(
    client: redis.Redis,
    names: list[TopicName],
    subs: int,
    run: int,
    rounds: int,
    start_round: int,
    source: str = "",
) -> float:
    """Redis time (us) per dispatch call over ``rounds`` periods, ``run`` calls a run."""
    many = client.register_script(source or DISPATCH_MANY.source)
    calls_made = 0
    client.config_resetstat()
    for r in range(start_round, start_round + rounds):
        clock = NOW_MS + r * 1000.0
        for name in names:
            subs_of = [f"sub-{s}" for s in range(subs)]
            for at in range(0, subs, run):
                calls = [renewal(name, sub, clock + 1) for sub in subs_of[at : at + run]]
                replies = many(*DISPATCH_MANY.call(name, calls))
                for reply in replies:
                    result = DispatchResult.from_reply(reply)
                    if result.entries != 1 or result.reason is not DispatchReason.MSG_BUDGET:
                        raise SystemExit(f"unexpected renewal outcome: {result}")
                calls_made += len(calls)
    _, usec = evalsha_usec(client)
    return usec / calls_made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--subs", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--against", default="", help="another checkout to measure too")
    args = parser.parse_args()
    sources = {"this tree": DISPATCH_MANY.source}
    if args.against:
        sources[args.against] = tree_source(args.against)
    backlog = args.rounds * args.repeats * 3 * len(sources) + 10
    with tempfile.TemporaryDirectory() as folder:
        server = EmbeddedRedis(folder).start()
        try:
            client = redis.Redis.from_url(server.url)
            names = setup(client, args.partitions, args.subs, backlog)
            measure(client, names, args.subs, args.subs, 1, 0)  # warm up (first periods)
            start = 1
            print(
                f"{time.strftime('%H:%M:%S', time.gmtime())} UTC, {args.partitions} partitions"
                f" x {args.subs} subscriptions, 1 msg/s each, {args.rounds} periods a round"
            )
            print("| scripts | calls a run | Redis time per dispatch call (us), best / rounds |")
            print("|---|---|---|")
            for run in (1, 2, args.subs):
                figures: dict[str, list[float]] = {name: [] for name in sources}
                for _ in range(args.repeats):
                    for name, source in sources.items():
                        figures[name].append(
                            measure(client, names, args.subs, run, args.rounds, start, source)
                        )
                        start += args.rounds
                for name, shown in figures.items():
                    rounds = " ".join(f"{f:.1f}" for f in shown)
                    print(f"| {name} | {run} | {min(shown):.1f} / {rounds} |")
            client.close()
        finally:
            server.stop()


if __name__ == "__main__":
    main()
