"""The worker's periodic resync: policies read again from the database heal a missed change
event, and the same policies again cost nothing (no limit of any subscription is resolved
anew, so no renewal waits behind a pass over every subscription)."""

from __future__ import annotations

import sqlalchemy as sa

from tests.workers.conftest import ADMIN, WorkerThread, wait_until

TOPIC = "persistent://acme/orders/resynced"
PATH = f"{ADMIN}/persistent/acme/orders/resynced"


def subscription_limit(worker: WorkerThread) -> int | None:
    """Messages per period the worker's dispatcher of ``sub`` enforces (None: not running)."""

    def read(w):
        runner = w.runners.get(TOPIC)
        dispatcher = runner.dispatchers.get("sub") if runner is not None else None
        return (
            None if dispatcher is None or dispatcher.rate is None else dispatcher.rate.permits_msg
        )

    return worker.call(read)


def test_a_resync_heals_a_missed_change_and_resolves_nothing_when_nothing_changed(
    http, namespace, worker, client, db
):
    assert http.put(PATH).status_code == 204
    assert http.put(f"{PATH}/subscription/sub").status_code == 204
    rate = {"dispatchThrottlingRateInMsg": 5, "dispatchThrottlingRateInByte": -1}
    assert http.post(
        f"{ADMIN}/namespaces/{namespace}/subscriptionDispatchRate", json=rate
    ).is_success
    consumer = client.subscribe(TOPIC, "sub")
    producer = client.create_producer(TOPIC)
    for _ in range(50):
        producer.send(b"m")
    wait_until(lambda: subscription_limit(worker) == 5, timeout=10)

    def resync_counting(w):
        """Resync once; how many partitions had their limits resolved again meanwhile."""
        runner = w.runners[TOPIC]
        calls = []
        original = runner.apply_limits

        def counted(*args, **kwargs):
            calls.append(1)
            return original(*args, **kwargs)

        runner.apply_limits = counted

        async def run():
            try:
                await w.resync()
            finally:
                del runner.apply_limits
            return len(calls), w.policy.version

        return run()

    version = worker.call(lambda w: w.policy.version)
    assert worker.call(resync_counting) == (0, version)

    # A change written behind the change events' back (as if its event were lost).
    with db.begin() as connection:
        changed = connection.execute(
            sa.text("UPDATE dispatch_rate_policies SET msg = 7 WHERE kind = :kind"),
            {"kind": "subscriptionDispatchRate"},
        ).rowcount
    assert changed == 1
    resolved, new_version = worker.call(resync_counting)
    assert resolved == 1 and new_version > version
    assert subscription_limit(worker) == 7
    consumer.close()
    producer.close()
