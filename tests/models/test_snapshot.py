"""``PolicySnapshot.with_namespace``: a namespace's policies replaced, every other kept."""

from __future__ import annotations

from models.dispatch_rate import DispatchRate
from models.snapshot import NamespaceRates, PolicySnapshot, TopicRates


def rate(msg: int) -> DispatchRate:
    return DispatchRate(msg=msg)


def test_a_namespace_part_replaces_that_namespace_and_its_topics_only():
    before = PolicySnapshot(
        namespaces={"a/x": NamespaceRates(rate(1)), "a/y": NamespaceRates(rate(2))},
        topics={
            "persistent://a/x/t": TopicRates(rate(3)),
            "persistent://a/xy/t": TopicRates(rate(4)),  # a namespace whose name extends "x"
            "persistent://a/y/t": TopicRates(rate(5)),
        },
        namespace_flow={"a/x": {"messageTTL": 10}, "a/y": {"messageTTL": 20}},
        topic_flow={"persistent://a/x/t": {"messageTTL": 30}},
    )
    part = PolicySnapshot(
        namespaces={"a/x": NamespaceRates(rate(9))},
        topics={"persistent://a/x/u": TopicRates(rate(8))},
    )
    after = before.with_namespace("a/x", part)
    assert after.namespaces == {"a/x": NamespaceRates(rate(9)), "a/y": NamespaceRates(rate(2))}
    assert set(after.topics) == {
        "persistent://a/x/u",
        "persistent://a/xy/t",
        "persistent://a/y/t",
    }
    assert after.namespace_flow == {"a/y": {"messageTTL": 20}}
    assert after.topic_flow == {}


def test_an_empty_part_removes_a_deleted_namespace():
    before = PolicySnapshot(
        namespaces={"a/x": NamespaceRates(rate(1))},
        topics={"persistent://a/x/t": TopicRates(rate(3))},
    )
    after = before.with_namespace("a/x", PolicySnapshot())
    assert after.namespaces == {} and after.topics == {}
