"""``reports advice`` and the ``backlog-drain-target`` verbs."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from sqlalchemy import insert

from models.reports import AdviceReportRow, ReportRun
from tests.api.test_advice import advice_row


def test_advice_as_json_and_as_a_table(cli, ok, namespace, db):
    now = datetime.now(UTC)
    with db.begin() as connection:
        connection.execute(
            insert(ReportRun).values(
                id=1, job="advice", status="succeeded", started_at=now, attempt=1, params={}
            )
        )
        connection.execute(insert(AdviceReportRow), [advice_row(1, "slow", span_end=now)])
    answer = json.loads(cli("reports", "advice", namespace).out)
    [slow] = answer["subscriptions"]
    assert slow["recommendation"]["perPartition"] == 28
    table = cli("reports", "advice", namespace, "--output", "table").out
    assert "throttled 41% of the time" in table and "dispatchRate" in table
    topic = cli("reports", "advice", namespace, "--topic", "persistent://acme/orders/other")
    assert json.loads(topic.out)["subscriptions"] == []
    missing = cli("reports", "advice", "acme/nope")
    assert missing.code == 1 and "(HTTP 404)" in missing.err
    # The drain target: set, read, and the advice follows it.
    ok("namespaces", "set-backlog-drain-target", namespace, "-t", "360")
    assert ok("namespaces", "get-backlog-drain-target", namespace).json == 360
    again = json.loads(cli("reports", "advice", namespace).out)["subscriptions"][0]
    assert again["recommendation"]["targetSeconds"] == 360
    assert again["recommendation"]["perPartition"] == 50
    ok("namespaces", "remove-backlog-drain-target", namespace)
    assert cli("reports", "advice", namespace).code == 0
