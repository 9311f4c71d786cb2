"""docs/coming-from-pulsar.md tells the truth about pulsar-client's arguments.

Every parameter ``tests/workers/test_pulsar_arguments.py`` walks (pulsar-client's ``Client``,
``create_producer``, ``subscribe``, ``send`` and ``send_async``) is in the page's section for
its call: in a row marked refused when Sluice refuses it, in another row when it is
implemented.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import sluice
from tests.workers.test_pulsar_arguments import (
    IMPLEMENTED,
    IMPLEMENTED_ELSEWHERE,
    PULSAR_CLIENT,
    PULSAR_CREATE_PRODUCER,
    PULSAR_SEND_ASYNC,
    PULSAR_SUBSCRIBE,
)

PAGE = Path(__file__).resolve().parents[1] / "docs" / "coming-from-pulsar.md"
SECTIONS = [
    ("Client", "Client", PULSAR_CLIENT),
    ("create_producer", "create_producer", PULSAR_CREATE_PRODUCER),
    ("send and send_async", "send", PULSAR_SEND_ASYNC),
    ("subscribe and the consumer", "subscribe", PULSAR_SUBSCRIBE),
]


def rows(title: str) -> list[str]:
    text = PAGE.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return [line for line in text[start:end].splitlines() if line.startswith("| ") and "`" in line]


@pytest.mark.parametrize(("title", "call", "names"), SECTIONS, ids=[s[0] for s in SECTIONS])
def test_every_argument_has_its_true_status(title, call, names):
    table = rows(title)
    for name in names:
        mentioned = [row for row in table if re.search(rf"[`(]{name}\b", row.split(" | ")[0])]
        assert mentioned, f"{name} is missing from the section {title!r}"
        implemented = name in IMPLEMENTED[call] or name in IMPLEMENTED_ELSEWHERE
        if implemented:
            assert any("Refused" not in row for row in mentioned), name
        else:
            assert any("Refused (`NotSupported`)" in row for row in mentioned), name


def test_what_the_page_says_is_not_provided_is_absent_and_the_rest_present():
    assert not hasattr(sluice.Client, "new_transaction")
    for name in ("read_next", "has_message_available", "topic", "is_connected", "close"):
        assert hasattr(sluice.Reader, name)
    assert hasattr(sluice.Client, "create_reader") and not hasattr(sluice.Reader, "seek")
    for name in ("seek", "batch_receive", "pause_message_listener", "get_last_message_id"):
        assert not hasattr(sluice.Consumer, name)
    for name in (
        "receive",
        "acknowledge",
        "acknowledge_cumulative",
        "negative_acknowledge",
        "redeliver_unacknowledged_messages",
        "unsubscribe",
        "close",
        "is_connected",
    ):
        assert hasattr(sluice.Consumer, name)
    for name in ("send", "send_async", "flush", "close", "last_sequence_id"):
        assert hasattr(sluice.Producer, name)
    assert hasattr(sluice.Client, "get_topic_partitions")
