"""Admin API latency: GET applied dispatch rate at a fixed rate, POST topic rate under load.

Baseline (same run, same rate): ``GET /admin/v2/brokers/health``, which touches no database.
Targets on a 2-core machine, one uvicorn worker: GET applied p99 under 10 ms at 500
requests/s; POST topic dispatchRate from 8 concurrent callers p99 under 100 ms, the wait until
the broker worker enforces each write included (a worker runs, owning the topic).

    python -m bench.admin_latency [--quick]
"""

from __future__ import annotations

import asyncio

import orjson

from bench.harness import Stack, arguments, percentile, report
from bench.httpload import closed_loop, open_loop, prepare

TOPIC = "/admin/v2/persistent/bench/ns/t"


def main() -> None:
    args = arguments(__doc__.split("\n")[0])
    seconds = 2.0 if args.quick else 10.0
    rate = 500.0
    with Stack() as stack:
        stack.setup_namespace()
        with stack.admin() as http:
            http.put(TOPIC)
            http.post(
                "/admin/v2/namespaces/bench/ns/dispatchRate",
                json={"dispatchThrottlingRateInMsg": 1000},
            )
        url = stack.admin_url
        health_request = prepare(url, "GET", "/admin/v2/brokers/health")
        applied_request = prepare(url, "GET", f"{TOPIC}/dispatchRate?applied=true")

        def post(n: int) -> bytes:
            body = orjson.dumps({"dispatchThrottlingRateInMsg": 100 + n, "ratePeriodInSecond": 1})
            return prepare(url, "POST", f"{TOPIC}/dispatchRate", body)

        asyncio.run(open_loop(url, applied_request, rate, 1.0))  # warm up
        health = asyncio.run(open_loop(url, health_request, rate, seconds))
        applied = asyncio.run(open_loop(url, applied_request, rate, seconds))
        posts, post_rate = asyncio.run(closed_loop(url, post, 8, seconds))
    rows = []
    for name, values, throughput in (
        ("GET brokers/health (baseline)", health, rate),
        ("GET dispatchRate?applied=true", applied, rate),
        ("POST topic dispatchRate, 8 concurrent", posts, post_rate),
    ):
        rows.append(
            {
                "request": name,
                "requests/s": throughput,
                "p50 ms": percentile(values, 0.50),
                "p99 ms": percentile(values, 0.99),
                "max ms": max(values),
                "p99 / baseline p99": percentile(values, 0.99) / percentile(health, 0.99),
            }
        )
    report("Admin API latency (one uvicorn worker, PostgreSQL)", rows, args.json)


if __name__ == "__main__":
    main()
