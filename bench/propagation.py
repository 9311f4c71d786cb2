"""Policy propagation latency: admin call returns -> the worker enforces the new limit.

For each of N changes (alternating topic and namespace dispatch rates), time from the
``POST`` returning 204 to the worker's ``/limits`` showing the new permits (polled every
millisecond).  Baseline, same run: the round trip of one ``GET /limits`` (the polling
resolution).  Target: p99 under 100 ms.

    python -m bench.propagation [--quick]
"""

from __future__ import annotations

import time

import httpx

from bench.harness import Stack, arguments, percentile, report

TOPIC = "persistent://bench/ns/prop"
PATH = "/admin/v2/persistent/bench/ns/prop"
NAMESPACE_PATH = "/admin/v2/namespaces/bench/ns"


def main() -> None:
    args = arguments(__doc__.split("\n")[0])
    changes = 40 if args.quick else 200
    with Stack() as stack:
        stack.setup_namespace()
        admin = stack.admin()
        admin.put(PATH)
        worker = httpx.Client(base_url=f"http://127.0.0.1:{stack.worker_port}", timeout=5)

        def permits() -> int | None:
            body = worker.get("/limits", params={"topic": TOPIC}).json()
            partition = body["partitions"].get(TOPIC)
            return None if partition is None else partition["topic"]["permitsPerPeriodInMsg"]

        deadline = time.monotonic() + 30
        while permits() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        probes = []
        for _ in range(50):
            started = time.perf_counter()
            permits()
            probes.append((time.perf_counter() - started) * 1000)
        delays, lost = [], 0
        for i in range(changes):
            value = 1000 + i
            target = f"{PATH}/dispatchRate" if i % 2 == 0 else f"{NAMESPACE_PATH}/dispatchRate"
            if i % 2:
                admin.delete(f"{PATH}/dispatchRate")  # let the namespace value through
            answer = admin.post(target, json={"dispatchThrottlingRateInMsg": value})
            answer.raise_for_status()
            returned = time.perf_counter()
            while permits() != value:
                if time.perf_counter() - returned > 5:
                    lost += 1
                    break
                time.sleep(0.001)
            else:
                delays.append((time.perf_counter() - returned) * 1000)
    report(
        "Policy propagation: admin call returned -> limit enforced by the worker",
        [
            {
                "measure": "GET /limits round trip (polling resolution, baseline)",
                "samples": len(probes),
                "p50 ms": percentile(probes, 0.5),
                "p99 ms": percentile(probes, 0.99),
                "max ms": max(probes),
                "not applied in 5 s": 0,
            },
            {
                "measure": "POST dispatchRate -> enforced",
                "samples": len(delays),
                "p50 ms": percentile(delays, 0.5),
                "p99 ms": percentile(delays, 0.99),
                "max ms": max(delays) if delays else float("nan"),
                "not applied in 5 s": lost,
            },
        ],
        args.json,
    )


if __name__ == "__main__":
    main()
