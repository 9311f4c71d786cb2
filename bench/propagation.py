"""Policy propagation: a write is answered only once the worker enforces it.

For each of N changes (alternating topic and namespace dispatch rates, and broker dynamic
config), time the ``POST`` from sending to its answer, then read the worker's ``/limits`` once:
the new permits must already be there (read-your-writes; counted when not).  Baseline, same
run: the round trip of one ``GET /limits``.  Target: p99 of the answer under 100 ms.

    python -m bench.propagation [--quick]
"""

from __future__ import annotations

import time

import httpx

from bench.harness import Stack, arguments, percentile, report

TOPIC = "persistent://bench/ns/prop"
PATH = "/admin/v2/persistent/bench/ns/prop"
NAMESPACE_PATH = "/admin/v2/namespaces/bench/ns"
BROKER_KEY = "/admin/v2/brokers/configuration/dispatchThrottlingRatePerTopicInMsg"


def main() -> None:
    args = arguments(__doc__.split("\n")[0])
    changes = 60 if args.quick else 300
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
        answers: dict[str, list[float]] = {"topic": [], "namespace": [], "broker": []}
        stale = {"topic": 0, "namespace": 0, "broker": 0}
        for i in range(changes):
            value = 1000 + i
            level = ("topic", "namespace", "broker")[i % 3]
            if level != "topic":
                admin.delete(f"{PATH}/dispatchRate")  # let the lower level through
            if level == "broker":
                admin.delete(f"{NAMESPACE_PATH}/dispatchRate")
            started = time.perf_counter()
            if level == "topic":
                body = {"dispatchThrottlingRateInMsg": value}
                answer = admin.post(f"{PATH}/dispatchRate", json=body)
            elif level == "namespace":
                answer = admin.post(
                    f"{NAMESPACE_PATH}/dispatchRate", json={"dispatchThrottlingRateInMsg": value}
                )
            else:
                answer = admin.post(f"{BROKER_KEY}/{value}")
            answers[level].append((time.perf_counter() - started) * 1000)
            answer.raise_for_status()
            if permits() != value:
                stale[level] += 1
    rows = [
        {
            "measure": "GET /limits round trip (baseline)",
            "samples": len(probes),
            "p50 ms": percentile(probes, 0.5),
            "p99 ms": percentile(probes, 0.99),
            "max ms": max(probes),
            "not enforced when answered": 0,
        }
    ]
    for level, values in answers.items():
        rows.append(
            {
                "measure": f"POST {level} rate: sent -> answered (enforced)",
                "samples": len(values),
                "p50 ms": percentile(values, 0.5),
                "p99 ms": percentile(values, 0.99),
                "max ms": max(values),
                "not enforced when answered": stale[level],
            }
        )
    report("Policy propagation: a write is answered once the worker enforces it", rows, args.json)


if __name__ == "__main__":
    main()
