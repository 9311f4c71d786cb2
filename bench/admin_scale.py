"""Admin operations at scale: creating 10,000 partitions, reading a 1,000-partition topic,
listing a namespace of 50,000 topics, and policy writes from 8 callers.

One deployment (admin service, PostgreSQL, Redis, one worker at first), phases in this order:

1. policy writes: 8 concurrent callers ``POST`` a namespace's ``dispatchRate`` (each answered
   once the worker enforces it), the worker running and idle; baseline: ``GET
   /admin/v2/brokers/health`` from 8 callers in the same run.  Target p99 <= 50 ms.
2. reads of a 1,000-partition topic with a subscription, once the worker owns and reports
   every partition: ``partitioned-stats``, the partitioned lookup (``.../lookup``, what
   ``topics partitioned-lookup`` calls) and ``/lookup/v2`` of a partition (``/lookup/v2`` of
   the base name answers 412, as before: each partition has its own owner); baseline: the
   same reads of a 10-partition topic.  Target < 200 ms.
3. creation, the worker stopped (the admin service's side alone: with a worker each answer
   also waits until the worker has taken the new partitions), each topic followed by ``PUT
   .../subscription/s``: 10 partitioned topics of 1,000 partitions, and 2,500 topics of 4
   partitions, from one caller and from 8; baseline: the same shape at 1/100 of the size,
   measured first (its time x 100 is the linear figure).  Target: 10,000 partitions with
   their subscriptions in under 30 s.
4. listing a namespace of 50,000 topics (10% partitioned, 4 partitions each, plus topics only
   the registry knows, as clients auto-create them): ``GET /admin/v2/persistent/{t}/{ns}`` and
   ``.../partitioned``; baseline: the same namespace shape at 500 topics.  Target < 1 s.  The
   topics are written straight into the database and the topic registry as the admin service
   writes them (creating them one by one over HTTP would take minutes and says nothing about
   listing).

``--quick`` runs every phase at about a tenth of the sizes.  Timings on a shared machine are
noisy: compare each figure with its baseline from the same run.

    python -m bench.admin_scale [--quick]
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable

import httpx
import orjson
from sqlalchemy import text

from bench import httpload
from bench.harness import Stack, arguments, percentile, report, stop_processes
from bench.httpload import Connection, closed_loop, prepare
from dataplane.catalog import topic_record
from models.db import make_sync_engine
from sluice.protocol import keys
from sluice.protocol.connection import connect

TENANT, NS = "bench", "ns"
BASE = f"/admin/v2/persistent/{TENANT}/{NS}"
JSON = {"Content-Type": "application/json"}
REGISTRY_ONLY = 0.002  # share of the listed topics only the registry knows (auto-created)


def ok(answer: httpx.Response) -> httpx.Response:
    """``answer``, or an error naming the request that failed."""
    if answer.status_code >= 300:
        raise RuntimeError(f"{answer.request.method} {answer.request.url}: {answer.text}")
    return answer


def create_topics(url: str, prefix: str, topics: int, partitions: int, callers: int = 1) -> float:
    """Create ``topics`` partitioned topics with a subscription each, from ``callers``
    concurrent clients; seconds taken."""
    body = str(partitions).encode()
    requests = []
    for i in range(topics):
        path = f"{BASE}/{prefix}{i}"
        requests.append(
            (
                prepare(url, "PUT", f"{path}/partitions", body),
                prepare(url, "PUT", f"{path}/subscription/s"),
            )
        )
    return asyncio.run(_create(url, requests, callers))


async def _create(url: str, requests: list[tuple[bytes, bytes]], callers: int) -> float:
    pool = await httpload.connect(url, callers)
    todo = iter(requests)

    async def caller(connection: Connection) -> None:
        for pair in todo:
            for raw in pair:
                status = await connection.request(raw)
                if status >= 300:
                    line = raw.split(b"\r\n")[0].decode()
                    raise RuntimeError(f"HTTP {status}: {line}")

    return await httpload.run_on(pool, caller)


def timed(http: httpx.Client, path: str, runs: int) -> list[float]:
    """Milliseconds of ``runs`` GETs of ``path`` (after one warm-up)."""
    ok(http.get(path))
    took = []
    for _ in range(runs):
        started = time.perf_counter()
        ok(http.get(path))
        took.append((time.perf_counter() - started) * 1000)
    return took


def wait_owned(http: httpx.Client, topic: str, timeout: float = 120.0) -> None:
    """Wait until the worker owns every partition of ``topic`` (new, empty partitions sleep
    from the start: stats then come from the raw counters, no worker document)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        owners = ok(http.get(f"{BASE}/{topic}/lookup")).json()
        if all(o["owner"] for o in owners.values()):
            return
        time.sleep(0.5)
    raise RuntimeError(f"the worker did not take every partition of {topic} in time")


def seed_namespace(stack: Stack, namespace: str, topics: int) -> int:
    """Write ``topics`` topics into ``namespace`` (10% partitioned with 4 partitions) in the
    database and the registry, plus a few only the registry holds; the names listed."""
    partitioned = topics // 10
    extra = max(1, int(topics * REGISTRY_ONLY))
    engine = make_sync_engine(stack.database_url)
    with engine.begin() as connection:
        namespace_id = connection.execute(
            text(
                "SELECT n.id FROM namespaces n JOIN tenants t ON n.tenant_id = t.id "
                "WHERE t.name = :t AND n.name = :n"
            ),
            {"t": TENANT, "n": namespace},
        ).scalar_one()
        connection.execute(
            text(
                "INSERT INTO topics (namespace_id, name, partitions, properties, created_at) "
                "SELECT :ns, 'topic-' || lpad(i::text, 6, '0'), "
                "CASE WHEN i < :partitioned THEN 4 ELSE 0 END, '{}'::jsonb, now() "
                "FROM generate_series(0, :count - 1) AS i"
            ),
            {"ns": namespace_id, "partitioned": partitioned, "count": topics},
        )
    engine.dispose()
    prefix = f"persistent://{TENANT}/{namespace}/"
    records = {
        f"{prefix}topic-{i:06d}": topic_record(4 if i < partitioned else 0) for i in range(topics)
    }
    records.update({f"{prefix}auto-{i}": topic_record(0) for i in range(extra)})
    redis = connect(stack.redis_url)
    items = list(records.items())
    for start in range(0, len(items), 5000):
        redis.hset(keys.TOPICS, mapping=dict(items[start : start + 5000]))
    redis.close()
    return partitioned * 4 + (topics - partitioned) + extra


def row(
    figure: str, size: str, value: float, unit: str, target: str, base: str, base_value: float
) -> dict:
    """One line of the report."""
    return {
        "figure": figure,
        "size": size,
        "value": value,
        "unit": unit,
        "target": target,
        "baseline": base,
        "baseline value": base_value,
        "value / baseline": value / base_value if base_value else float("nan"),
    }


def writes_phase(stack: Stack, seconds: float) -> list[dict]:
    """8 callers POST a namespace dispatchRate; 8 callers GET health (baseline)."""
    url = stack.admin_url
    health = prepare(url, "GET", "/admin/v2/brokers/health")
    path = f"/admin/v2/namespaces/{TENANT}/{NS}/dispatchRate"

    def post(n: int) -> bytes:
        body = orjson.dumps({"dispatchThrottlingRateInMsg": 1000 + n, "ratePeriodInSecond": 1})
        return prepare(url, "POST", path, body)

    asyncio.run(closed_loop(url, post, 8, 1.0))  # warm up
    baseline, _ = asyncio.run(closed_loop(url, lambda _n: health, 8, seconds))
    posts, rate = asyncio.run(closed_loop(url, post, 8, seconds))
    base_p99 = percentile(baseline, 0.99)
    return [
        row(
            f"POST namespace dispatchRate, 8 callers, p50 ({rate:,.0f} writes/s)",
            f"{len(posts):,} writes",
            percentile(posts, 0.5),
            "ms",
            "-",
            "health p50, 8 callers",
            percentile(baseline, 0.5),
        ),
        row(
            "POST namespace dispatchRate, 8 callers, p99",
            f"{len(posts):,} writes",
            percentile(posts, 0.99),
            "ms",
            "<= 50",
            "health p99, 8 callers",
            base_p99,
        ),
    ]


def creation_phase(url: str, scale: int) -> list[dict]:
    """The two creation shapes at 1/100 of the size (baseline), then at full size, from one
    caller and from 8."""
    rows = []
    for topics, partitions in ((10, 1000 // scale), (2500 // scale, 4)):
        # 1/100 of the partitions: a tenth of the topics of a tenth of the size, or a
        # hundredth of the small topics.
        small_topics = max(1, topics // 10) if partitions >= 100 else max(1, topics // 100)
        small_partitions = partitions // 10 if partitions >= 100 else partitions
        total, small_total = topics * partitions, small_topics * small_partitions
        for callers in (1, 8):
            tag = f"c{partitions}x{callers}"
            small = create_topics(url, f"{tag}s", small_topics, small_partitions, callers)
            full = create_topics(url, f"{tag}f", topics, partitions, callers)
            rows.append(
                row(
                    f"create {topics:,} x {partitions:,} partitions + a subscription each, "
                    f"{callers} caller{'s' if callers > 1 else ''}",
                    f"{total:,} partitions, {2 * topics:,} requests",
                    full,
                    "s",
                    "< 30" if total >= 10_000 else f"< {30 * total / 10_000:g} (scaled)",
                    f"{total // small_total} x the time of {small_topics} x {small_partitions}",
                    small * total / small_total,
                )
            )
    return rows


def reads_phase(http: httpx.Client, partitions: int, runs: int) -> list[dict]:
    """partitioned-stats and lookups of a topic of ``partitions`` and one of 1/100 of it."""
    small = max(1, partitions // 100)
    for name, count in (("readsmall", small), ("readbig", partitions)):
        ok(http.put(f"{BASE}/{name}/partitions", content=str(count), headers=JSON))
        ok(http.put(f"{BASE}/{name}/subscription/s"))
        wait_owned(http, name)
    rows = []
    for label, suffix in (
        ("GET partitioned-stats", "/partitioned-stats"),
        ("GET partitioned lookup (.../lookup)", "/lookup"),
        ("GET /lookup/v2 of a partition", None),
    ):
        figures = {}
        for name in ("readsmall", "readbig"):
            path = (
                f"/lookup/v2/topic/persistent/{TENANT}/{NS}/{name}-partition-0"
                if suffix is None
                else f"{BASE}/{name}{suffix}"
            )
            figures[name] = timed(http, path, runs)
        rows.append(
            median_row(
                label,
                f"{partitions:,} partitions",
                figures["readbig"],
                "< 200",
                f"same, {small} partitions",
                figures["readsmall"],
            )
        )
    return rows


def median_row(
    label: str, scale: str, big: list[float], target: str, baseline: str, small: list[float]
) -> dict:
    """A row of median latencies (ms) at ``scale`` against ``target``, beside the baseline's
    median at a smaller scale."""
    return row(
        f"{label}, median (max {max(big):,.0f} ms)",
        scale,
        statistics.median(big),
        "ms",
        target,
        baseline,
        statistics.median(small),
    )


def listing_phase(stack: Stack, http: httpx.Client, topics: int, runs: int) -> list[dict]:
    """List a namespace of ``topics`` topics, and one of 1/100 of them (baseline)."""
    names = {}
    for namespace, count in (("listsmall", topics // 100), ("listbig", topics)):
        ok(http.put(f"/admin/v2/namespaces/{TENANT}/{namespace}"))
        names[namespace] = seed_namespace(stack, namespace, count)
    rows = []
    for label, suffix, check in (
        ("GET namespace topics", "", lambda n, got: len(got) == names[n]),
        ("GET namespace partitioned topics", "/partitioned", lambda _n, got: len(got) > 0),
    ):
        figures = {}
        for namespace in ("listsmall", "listbig"):
            path = f"/admin/v2/persistent/{TENANT}/{namespace}{suffix}"
            got = ok(http.get(path)).json()
            if not check(namespace, got):
                raise RuntimeError(f"{path}: {len(got)} names, expected {names[namespace]}")
            figures[namespace] = timed(http, path, runs)
        rows.append(
            median_row(
                label,
                f"{topics:,} topics ({len(ok(http.get(path)).json()):,} names)",
                figures["listbig"],
                "< 1000",
                f"same, {topics // 100:,} topics",
                figures["listsmall"],
            )
        )
    return rows


def main() -> None:
    args = arguments(__doc__.split("\n")[0])
    scale = 10 if args.quick else 1
    rows: list[dict] = []
    with Stack() as stack:
        stack.setup_namespace(TENANT, NS)
        with httpx.Client(base_url=stack.admin_url, timeout=120) as http:
            phases: list[tuple[str, Callable[[], list[dict]]]] = [
                ("writes", lambda: writes_phase(stack, 2.0 if args.quick else 10.0)),
                ("reads", lambda: reads_phase(http, 1000 // scale, 10 if args.quick else 20)),
                ("stop the worker", lambda: stop_worker(stack)),
                ("creation", lambda: creation_phase(stack.admin_url, scale)),
                ("listing", lambda: listing_phase(stack, http, 50_000 // scale, 5)),
            ]
            for name, phase in phases:
                started = time.perf_counter()
                rows += phase()
                print(f"{name}: {time.perf_counter() - started:.1f} s", flush=True)
    report(
        "Admin operations at scale (admin service, PostgreSQL, Redis; one worker for the "
        "writes and the reads)",
        rows,
        args.json,
    )


def stop_worker(stack: Stack) -> list[dict]:
    """Stop the worker (it leaves the fleet as it stops): creation is measured on the admin
    service's side alone, and the worker would take every seeded partition."""
    stop_processes(stack.processes[1:])
    del stack.processes[1:]
    return []


if __name__ == "__main__":
    main()
