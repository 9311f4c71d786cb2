"""The admin service stays responsive while the largest allowed topic comes and goes.

A loop creates a partitioned topic with ``maxNumPartitionsPerPartitionedTopic`` partitions
(the default bound), creates a subscription on it, reads its partitioned stats and lookup,
deletes the subscription and deletes the topic, again and again, while ``GET
/admin/v2/brokers/health`` runs at a fixed rate.  Baseline: the same health load with nothing
else going on, measured in the same run.  Target: health p99 under 50 ms during the churn.
The full run also churns a topic at the highest value the setting accepts.

    python -m bench.partition_churn [--quick]
"""

from __future__ import annotations

import asyncio
import threading
import time

import httpx

from bench.harness import Stack, arguments, percentile, report
from bench.httpload import open_loop, prepare
from models.broker_config import DEFAULT_MAX_PARTITIONS, PARTITIONS_HARD_MAX

BASE = "/admin/v2/persistent/bench/ns"
MAX_KEY = "/admin/v2/brokers/configuration/maxNumPartitionsPerPartitionedTopic"
RATE = 100.0


def churn(http: httpx.Client, partitions: int, stop: threading.Event, took: dict) -> None:
    """Create, use and delete a topic of ``partitions`` partitions until ``stop`` is set."""
    cycle = 0
    while not stop.is_set():
        topic = f"{BASE}/churn{cycle}"
        for step, method, path, body in (
            ("create", "PUT", f"{topic}/partitions", str(partitions)),
            ("subscribe", "PUT", f"{topic}/subscription/s", None),
            ("partitioned-stats", "GET", f"{topic}/partitioned-stats", None),
            ("lookup", "GET", f"{topic}/lookup", None),
            ("unsubscribe", "DELETE", f"{topic}/subscription/s", None),
            ("delete", "DELETE", f"{topic}/partitions", None),
        ):
            started = time.perf_counter()
            headers = {"Content-Type": "application/json"} if body else None
            answer = http.request(method, path, content=body, headers=headers)
            if answer.status_code >= 300:
                raise RuntimeError(f"{step} {path}: {answer.status_code} {answer.text}")
            took.setdefault(step, []).append((time.perf_counter() - started) * 1000)
        cycle += 1
    took["cycles"] = [cycle]


def measure(stack: Stack, partitions: int | None, seconds: float) -> tuple[list[float], dict]:
    """Health latencies (ms) over ``seconds``, while churning ``partitions`` (None: idle)."""
    stop, took = threading.Event(), {}
    worker = None
    if partitions is not None:
        http = httpx.Client(base_url=stack.admin_url, timeout=120)
        worker = threading.Thread(target=churn, args=(http, partitions, stop, took))
        worker.start()
    try:
        request = prepare(stack.admin_url, "GET", "/admin/v2/brokers/health")
        latencies = asyncio.run(open_loop(stack.admin_url, request, RATE, seconds))
        while worker is not None and not took.get("delete"):  # at least one whole cycle
            latencies += asyncio.run(open_loop(stack.admin_url, request, RATE, 1.0))
    finally:
        stop.set()
        if worker is not None:
            worker.join()
    return latencies, took


def main() -> None:
    args = arguments(__doc__.split("\n")[0])
    seconds = 5.0 if args.quick else 30.0
    sizes = (
        [DEFAULT_MAX_PARTITIONS] if args.quick else [DEFAULT_MAX_PARTITIONS, PARTITIONS_HARD_MAX]
    )
    rows = []
    with Stack() as stack:
        stack.setup_namespace()
        baseline, _ = measure(stack, None, seconds)
        runs = [("idle (baseline)", baseline, {})]
        with stack.admin() as http:
            for size in sizes:
                http.post(f"{MAX_KEY}/{size}").raise_for_status()
                latencies, took = measure(stack, size, seconds)
                runs.append((f"churning a {size:,}-partition topic", latencies, took))
        for label, latencies, took in runs:
            steps = {k: v for k, v in took.items() if k != "cycles"}
            rows.append(
                {
                    "health during": label,
                    "requests": len(latencies),
                    "p50 ms": percentile(latencies, 0.5),
                    "p99 ms": percentile(latencies, 0.99),
                    "max ms": max(latencies),
                    "p99 / baseline p99": percentile(latencies, 0.99) / percentile(baseline, 0.99),
                    "topic cycles": took.get("cycles", [0])[0],
                    "median ms per step": ", ".join(
                        f"{step} {percentile(v, 0.5):,.0f}" for step, v in steps.items()
                    )
                    or "-",
                }
            )
    report(
        f"Admin health at {RATE:.0f} req/s while the largest topic is created and deleted "
        "(admin service and one worker, PostgreSQL)",
        rows,
        args.json,
    )


if __name__ == "__main__":
    main()
