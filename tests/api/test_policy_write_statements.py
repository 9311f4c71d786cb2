"""A policy write runs statements built once: the row lock, the deferred UPDATE and the
statement that writes it with the audit entry and the change event are the same objects from
one write to the next, their values passed as parameters (building them per write cost more
CPU than the rest of the write's SQL)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, event

from tests.api.orders import NS, create_topic
from tests.bodies import dispatch_rate as rate


@pytest.fixture
def executed() -> Iterator[dict[str, list[object]]]:
    """The row locks and the writes with their audit entry and change event that every
    engine of this process executes (the admin service runs in a thread of the test
    process)."""
    seen: dict[str, list[object]] = defaultdict(list)

    def before(_conn, clause, *_args) -> None:
        sql = " ".join(str(clause).split())
        if sql.startswith("SELECT dispatch_rate_policies") and sql.endswith("FOR UPDATE"):
            seen["lock"].append(clause)
        elif sql.startswith("WITH write_0"):
            seen["write"].append(clause)

    event.listen(Engine, "before_execute", before)
    yield seen
    event.remove(Engine, "before_execute", before)


def test_policy_writes_reuse_their_statements(http, executed) -> None:
    create_topic(http, partitions=1)
    assert http.post(f"{NS}/dispatchRate", json=rate(1000)).status_code == 204
    executed.clear()
    for value in (1001, 1002, 1003):
        assert http.post(f"{NS}/dispatchRate", json=rate(value)).status_code == 204
    assert http.get(f"{NS}/dispatchRate").json() == rate(1003)
    locks, writes = executed["lock"], executed["write"]
    assert len(locks) == 3 and len(writes) == 3
    assert all(lock is locks[0] for lock in locks)
    assert all(write is writes[0] for write in writes)
