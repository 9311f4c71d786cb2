"""Which resource group applies to a topic (topic > namespace > tenant), the body a PUT
sets, and how a group's rate joins the binding limit: pure functions."""

from __future__ import annotations

import pytest

from models.errors import InvalidInput, PreconditionFailed
from models.resource_groups import (
    GROUP_LIMITER,
    Attachment,
    GroupRates,
    GroupSnapshot,
    check_weight,
    parse_group_body,
    with_group,
)
from sluice.protocol.names import TopicName

TOPIC = TopicName("acme", "orders", "created")
GROUPS = {name: GroupRates(dispatch_msgs=10) for name in ("t", "n", "p")}


def test_the_most_specific_attachment_wins() -> None:
    snapshot = GroupSnapshot(
        GROUPS,
        tenants={"acme": Attachment("t")},
        namespaces={"acme/orders": Attachment("n", 3)},
        topics={TOPIC.full: Attachment("p", 2)},
    )
    binding = snapshot.binding_for(TOPIC.partition(1))
    assert binding is not None
    assert (binding.group, binding.level, binding.member, binding.weight) == (
        "p",
        "topic",
        TOPIC.full,
        2,
    )
    assert binding.member_id == f"topic:{TOPIC.full}"
    other = snapshot.binding_for(TopicName("acme", "orders", "other"))
    assert other is not None and (other.group, other.weight) == ("n", 3)
    elsewhere = snapshot.binding_for(TopicName("acme", "billing", "x"))
    assert elsewhere is not None and (elsewhere.group, elsewhere.level) == ("t", "tenant")
    assert snapshot.binding_for(TopicName("other", "ns", "x")) is None


def test_an_attachment_to_a_missing_group_falls_through() -> None:
    snapshot = GroupSnapshot(
        {"n": GroupRates()},
        namespaces={"acme/orders": Attachment("n")},
        topics={TOPIC.full: Attachment("gone")},
    )
    binding = snapshot.binding_for(TOPIC)
    assert binding is not None and binding.group == "n"


def test_a_put_body_sets_only_the_fields_sent() -> None:
    assert parse_group_body({"dispatchRateInMsgs": 5, "publishRateInMsgs": None}) == {
        "dispatchRateInMsgs": 5
    }
    for body in (None, [], {"x": 1}, {"dispatchRateInMsgs": True}, {"dispatchRateInMsgs": 2**63}):
        with pytest.raises(InvalidInput):
            parse_group_body(body)


def test_weights() -> None:
    assert check_weight(None) == 1
    assert check_weight(1000) == 1000
    for bad in (0, -1, 1001):
        with pytest.raises(PreconditionFailed):
            check_weight(bad)


def test_the_lowest_rate_binds() -> None:
    assert with_group(None, None, 100) == (100.0, GROUP_LIMITER)
    assert with_group(50.0, "topic", 100) == (50.0, "topic")
    assert with_group(500.0, "topic", 100) == (100.0, GROUP_LIMITER)
    assert with_group(500.0, "topic", -1) == (500.0, "topic")
