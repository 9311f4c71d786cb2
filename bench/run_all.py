"""Run every benchmark and write ``BENCHMARKS.md``.

    python -m bench.run_all                 # full runs, writes BENCHMARKS.md (25 min and more)
    python -m bench.run_all --quick         # smoke runs (CI), writes to --output if given
    python -m bench.run_all --only failover,propagation

The full runs took about 25 minutes before ``idle_scale`` and the 100,000-subscription row of
``many_subscriptions``, whose set-up (100,000 partitions or subscriptions) lasts as long as
the worker needs to take them on.  ``idle_scale_standalone`` is ``idle_scale --standalone``.

Each benchmark runs as its own process; its tables (figures as ratios to a baseline measured
in the same run) are copied into the file with the machine, the date and the command that
reproduces them.  A benchmark that fails, or prints no table with numbers, makes the runner
exit non-zero.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# (module, what it measures against which target of the design brief)
BENCHMARKS: tuple[tuple[str, str], ...] = (
    (
        "admin_latency",
        "admin GET p99 < 10 ms at 500 req/s; POST from 8 callers p99 <= 100 ms, the wait "
        "for enforcement included",
    ),
    (
        "admin_under_load",
        "sluice standalone: admin health p99 < 10 ms while its worker dispatches unthrottled "
        "(target 50k msg/s) and while it owns many idle partitions",
    ),
    (
        "partition_churn",
        "health p99 < 50 ms while a topic of maxNumPartitionsPerPartitionedTopic partitions "
        "is created, used and deleted",
    ),
    (
        "admin_scale",
        "10,000 partitions with a subscription each created in < 30 s (10 x 1,000 and "
        "2,500 x 4); partitioned-stats and lookups of 1,000 partitions < 200 ms; listing "
        "50,000 topics < 1 s; namespace dispatchRate from 8 callers p99 <= 50 ms, one idle "
        "worker",
    ),
    ("dispatch_throughput", "one worker vs a raw XREADGROUP+XACK loop: ratio >= 0.6"),
    (
        "throttle_accuracy",
        "no period over its limit by more than one entry (worker's books and consumer's "
        "strict bound), 100 msg/s to 100k msg/s and 1-50 MB/s; >= 98% of the limit used",
    ),
    (
        "many_subscriptions",
        "1,000 subscriptions at 10 msg/s, 10,000 at 1 msg/s and 100,000 at 0.1 msg/s (1 per "
        "10 s period): utilisation p5 >= 0.98, no period over the strict bound, no aggregate "
        "period over the limit + 1 entry each; worker CPU < 0.5 core at 10,000 (stated at "
        "100,000)",
    ),
    (
        "idle_scale",
        "0 to 100,000 idle partitions (quick: 5,000) on one worker, 10% with a connected "
        "consumer: worker CPU and Redis CPU < 0.05 core at 100k, < 2 KiB worker and < 4 KiB "
        "Redis memory per idle partition, admin health p99 < 10 ms, Sluice + Redis < 0.02 "
        "core per 1,000 idle partitions",
    ),
    (
        "idle_scale_standalone",
        "`sluice standalone` (its whole process tree, embedded Redis included) with 0, 1,000 "
        "and 5,000 idle partitions: Sluice + Redis < 0.02 core per 1,000 idle partitions, "
        "admin health p99 < 10 ms",
    ),
    ("propagation", "REST change -> in force when the answer arrives; none lost"),
    (
        "soak_chaos",
        "unplanned faults (worker SIGKILL and SIGSTOP, Redis Cluster master SIGKILL, "
        "PostgreSQL immediate restart) under throttled traffic with durable acknowledgements "
        "and hostile admin calls: 0 acknowledged sends lost, duplicates <= counted "
        "redeliveries, nothing over the strict bound, no 5xx (full: 30 min; quick: 90 s)",
    ),
    ("failover", "SIGKILL owner -> new owner dispatches: < lease TTL + 1 s (default < 5 s)"),
    (
        "lease_scale",
        "owning N partitions (up to 100,000) costs the same Redis commands a second with no "
        "traffic whatever N; a SIGKILLed worker's N partitions move within lease TTL + TTL/3",
    ),
    (
        "cluster_scaling",
        "1 server vs a 3-master Redis Cluster, same workers and consumers: end-to-end "
        "dispatch ratio and Redis CPU per shard; strict bound per partition on the cluster",
    ),
    ("reports_bench", "10 M snapshot rows < 60 s; 20 M < 2.2x the 10 M time; vs DuckDB"),
    (
        "acl_overhead",
        "data-plane ACLs: a session user's produce and read calls against a service user's "
        "(ratio), with 1 and 50 grants",
    ),
    (
        "backlog_read",
        "a stats read over a 1 M-entry backlog whose lag Redis cannot tell: no Redis call "
        "over a few ms of work; the next read O(1)",
    ),
    (
        "stats_live_read",
        "a stats read with every counter read live: two pipelined round trips per batch of "
        "partitions, as the document-only read; its latency as a ratio to that read's",
    ),
)
# Benchmarks that are a variant of another module: name -> module and its arguments.
VARIANTS: dict[str, list[str]] = {
    "idle_scale_standalone": ["idle_scale", "--standalone"],
    "soak_chaos": ["soak", "--chaos"],
}
TABLE_ROW = re.compile(r"^\|.*\d.*\|$", re.MULTILINE)


def arguments_of(name: str, quick: bool) -> list[str]:
    """The ``python -m`` arguments that run benchmark ``name``."""
    module, *extra = VARIANTS.get(name, [name])
    return [f"bench.{module}", *extra, *(["--quick"] if quick else [])]


def run(module: str, quick: bool, timeout: float) -> tuple[str, float]:
    """Run one benchmark; return its report (from the first table heading) and seconds."""
    command = [sys.executable, "-m", *arguments_of(module, quick)]
    started = time.monotonic()
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
    )
    seconds = time.monotonic() - started
    out = done.stdout
    if done.returncode != 0 or "\n## " not in out or not TABLE_ROW.search(out):
        tail = (done.stderr or out)[-2000:]
        raise RuntimeError(f"bench.{module} failed (exit {done.returncode}):\n{tail}")
    return out[out.index("\n## ") :].strip(), seconds


def machine() -> str:
    """One line describing this machine."""
    memory = ""
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        memory = f", {pages / 2**30:.0f} GiB"
    except (ValueError, OSError):
        pass
    return (
        f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores{memory}, "
        f"Python {platform.python_version()}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke runs (small sizes)")
    parser.add_argument("--output", help="file to write (default BENCHMARKS.md unless --quick)")
    parser.add_argument("--only", help="comma-separated benchmark names")
    parser.add_argument("--timeout", type=float, default=2400, help="per benchmark, seconds")
    args = parser.parse_args()
    wanted = set(args.only.split(",")) if args.only else None
    output = args.output or (None if args.quick else str(ROOT / "BENCHMARKS.md"))
    sections, failures = [], []
    for module, target in BENCHMARKS:
        if wanted and module not in wanted:
            continue
        print(f"bench.{module} ...", flush=True)
        try:
            text, seconds = run(module, args.quick, args.timeout)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            failures.append(module)
            print(exc, file=sys.stderr)
            continue
        command = "python -m " + " ".join(arguments_of(module, args.quick))
        print(f"  done in {seconds:.0f} s", flush=True)
        sections.append(
            f"## bench.{module}\n\nTarget: {target}.  Reproduce: `{command}` "
            f"({seconds:.0f} s).\n\n" + text.replace("\n## ", "\n### ").replace("## ", "### ", 1)
        )
    if output:
        header = (
            "# Sluice benchmarks\n\n"
            f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {machine()}"
            f"{' (quick smoke runs)' if args.quick else ''}.  Every figure is printed next to "
            "a baseline measured in the same run on the same machine; re-run one section with "
            "its command, or all of them with `python -m bench.run_all`.\n"
        )
        Path(output).write_text(header + "\n" + "\n\n".join(sections) + "\n")
        print(f"wrote {output}")
    if failures:
        print(f"failed: {', '.join(failures)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
