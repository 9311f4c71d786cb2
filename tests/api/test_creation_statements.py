"""Creating a partitioned topic with a subscription, as scripts create thousands of them: each
request reads what it checks in two statements (the namespace with the topic's rows; the
broker's settings with the stored limits) and writes in one (the row with its audit entry and
change event), where each took five, and without a BEGIN and a COMMIT around them (that
statement is atomic by itself).  Its answers stay what they were."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, event, text

from tests.api.orders import PERSISTENT, create_topic

TOPIC = f"{PERSISTENT}/small"


@pytest.fixture
def request_statements() -> Iterator[list[str]]:
    """The SQL that request handlers send (the admin service runs in a thread of the test
    process; its background tasks, such as the policy cache's reloads, are left out), each
    prefixed with "autocommit: " when sent outside a transaction."""
    seen: list[str] = []

    def before(conn, _cursor, statement, *_args) -> None:
        task = asyncio.current_task()
        if task is not None and task.get_coro().__qualname__.endswith("run_asgi"):
            outside = conn.connection.dbapi_connection.autocommit
            seen.append(("autocommit: " if outside else "") + " ".join(statement.split()))

    event.listen(Engine, "before_cursor_execute", before)
    yield seen
    event.remove(Engine, "before_cursor_execute", before)


def test_a_topic_and_its_subscription_take_three_statements_each(http, request_statements) -> None:
    create_topic(http)  # the tenant and the namespace
    request_statements.clear()
    assert http.put(f"{TOPIC}/partitions", json=4).status_code == 204
    topic, request_statements[:] = list(request_statements), []
    assert http.put(f"{TOPIC}/subscription/s").status_code == 204
    subscription = list(request_statements)
    assert len(topic) == 3, topic
    assert len(subscription) == 3, subscription
    # No transaction: no BEGIN before the first statement, no COMMIT after the last.
    assert all(sql.startswith("autocommit: ") for sql in topic + subscription)
    # The settings and the stored limits in one read; the row written with its audit entry.
    assert all("broker_config" not in sql or "flow_policies" in sql for sql in topic)
    assert topic[-1].startswith("autocommit: WITH write_0 AS (INSERT INTO topics")
    assert subscription[-1].startswith("autocommit: WITH write_0 AS (INSERT INTO subscriptions")
    assert http.get(f"{TOPIC}/partitions").json() == {"partitions": 4}
    assert http.get(f"{TOPIC}/subscriptions").json() == ["s"]


def test_creating_them_again_is_refused_and_leaves_nothing(http, db) -> None:
    create_topic(http)
    assert http.put(f"{TOPIC}/partitions", json=4).status_code == 204
    assert http.put(f"{TOPIC}/subscription/s").status_code == 204
    again = http.put(f"{TOPIC}/partitions", json=4)
    assert (again.status_code, again.json()) == (
        409,
        {"reason": "Partitioned topic already exists"},
    )
    for query in ("", "?dryRun=true"):
        again = http.put(f"{TOPIC}/subscription/s{query}")
        assert again.status_code == 409
        assert again.json() == {"reason": "Subscription already exists for topic"}
    with db.connect() as connection:
        audit = connection.execute(
            text("SELECT entity_type, entity FROM audit_log WHERE entity LIKE '%small%'")
        ).all()
        events = connection.execute(
            text("SELECT kind FROM outbox_events WHERE entity LIKE '%small%'")
        ).all()
    assert sorted(audit) == [
        ("subscription", "persistent://acme/orders/small#s"),
        ("topic", "persistent://acme/orders/small"),
    ]
    assert sorted(kind for (kind,) in events) == ["subscription", "topic"]


def test_a_dry_run_creates_no_subscription(http) -> None:
    create_topic(http)
    assert http.put(f"{TOPIC}/partitions", json=4).status_code == 204
    assert http.put(f"{TOPIC}/subscription/s?dryRun=true").status_code == 204
    assert http.get(f"{TOPIC}/subscriptions").json() == []
    assert http.put(f"{TOPIC}/subscription/s").status_code == 204


def test_creation_answers_in_pulsars_order(http) -> None:
    """A bad partition count (406) before a missing namespace (404) before a taken name."""
    create_topic(http)
    missing = f"{PERSISTENT.replace('orders', 'nowhere')}/small/partitions"
    assert http.put(missing, json=0).status_code == 406
    answer = http.put(missing, json=4)
    assert (answer.status_code, answer.json()) == (404, {"reason": "Namespace does not exist"})
    assert http.put(f"{TOPIC}/partitions", json=4).status_code == 204
    assert http.put(f"{TOPIC}/partitions", json=0).status_code == 406
    answer = http.put(f"{TOPIC}-partition-1")
    assert (answer.status_code, answer.json()) == (409, {"reason": "This topic already exists"})
