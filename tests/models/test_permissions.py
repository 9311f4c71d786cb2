"""The grant rule and the subscription-list rule as pure functions, and the validation of
roles and actions."""

from __future__ import annotations

import pytest

from models.errors import InvalidInput, PreconditionFailed
from models.permissions import (
    Action,
    Grant,
    allowed,
    check_role,
    covers,
    parse_actions,
    parse_roles,
    subscription_allowed,
)
from sluice.protocol.names import TopicName

PRODUCE, CONSUME = Action.PRODUCE, Action.CONSUME
BOTH = frozenset({PRODUCE, CONSUME})


def on_namespace(actions=BOTH, tenant="acme", namespace="orders") -> Grant:
    return Grant(tenant, namespace, None, frozenset(actions))


def on_topic(topic: str, actions=BOTH) -> Grant:
    tenant, namespace, _ = topic.removeprefix("persistent://").split("/")
    return Grant(tenant, namespace, topic, frozenset(actions))


def test_a_namespace_grant_covers_every_topic_and_partition_of_its_namespace():
    grants = [on_namespace({CONSUME})]
    for topic in (
        "persistent://acme/orders/created",
        "persistent://acme/orders/created-partition-0",
        "persistent://acme/orders/other-partition-17",
        "acme/orders/short-form",
    ):
        assert allowed(grants, topic, CONSUME), topic
        assert allowed(grants, topic, "consume"), topic
        assert not allowed(grants, topic, PRODUCE), topic


def test_a_namespace_grant_covers_no_other_namespace_or_tenant():
    grants = [on_namespace()]
    for topic in (
        "persistent://acme/billing/created",
        "persistent://other/orders/created",
        "persistent://acme/orders-2/created",
        "persistent://acmex/orders/created",
    ):
        assert not allowed(grants, topic, PRODUCE), topic
        assert not allowed(grants, topic, CONSUME), topic


def test_a_topic_grant_covers_the_topic_and_its_partitions_only():
    grants = [on_topic("persistent://acme/orders/created", {PRODUCE})]
    assert allowed(grants, "persistent://acme/orders/created", PRODUCE)
    assert allowed(grants, "persistent://acme/orders/created-partition-0", PRODUCE)
    assert allowed(grants, "persistent://acme/orders/created-partition-41", PRODUCE)
    assert not allowed(grants, "persistent://acme/orders/created", CONSUME)
    for topic in (
        "persistent://acme/orders/created2",
        "persistent://acme/orders/create",
        "persistent://acme/orders/other",
        "persistent://acme/orders/created-partition-x",
        "persistent://acme/orders/created-partition-",
        "persistent://acme/billing/created",
        "persistent://other/orders/created",
    ):
        assert not allowed(grants, topic, PRODUCE), topic


def test_grants_add_up_across_levels():
    grants = [
        on_namespace({CONSUME}),
        on_topic("persistent://acme/orders/created", {PRODUCE}),
    ]
    assert allowed(grants, "persistent://acme/orders/created-partition-1", PRODUCE)
    assert allowed(grants, "persistent://acme/orders/created-partition-1", CONSUME)
    assert allowed(grants, "persistent://acme/orders/other", CONSUME)
    assert not allowed(grants, "persistent://acme/orders/other", PRODUCE)


def test_nothing_is_allowed_without_a_grant_or_with_an_empty_one():
    assert not allowed([], "persistent://acme/orders/created", PRODUCE)
    empty = [on_namespace(set()), on_topic("persistent://acme/orders/created", set())]
    assert not allowed(empty, "persistent://acme/orders/created", PRODUCE)
    assert not allowed(empty, "persistent://acme/orders/created", CONSUME)


def test_malformed_names_and_unknown_actions_are_never_allowed():
    grants = [on_namespace()]
    for topic in (
        "non-persistent://acme/orders/created",
        "persistent://acme/orders",
        "persistent://acme/orders/a/b",
        "persistent://acme/orders/bad name",
        "",
    ):
        assert not allowed(grants, topic, PRODUCE), topic
    for action in ("functions", "sinks", "Produce", ""):
        assert not allowed(grants, "persistent://acme/orders/created", action), action


def test_parse_actions_sorts_and_deduplicates():
    assert parse_actions(["produce", "consume", "produce"]) == ["consume", "produce"]
    assert parse_actions(["consume"]) == ["consume"]
    assert parse_actions([]) == []


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (None, "Request body is required"),
        ({"actions": []}, "must be a JSON list"),
        ("produce", "must be a JSON list"),
        ([1], "An action is a string"),
        (["produce", "publish"], "Unknown action 'publish'"),
        (["functions"], "Action functions is not supported: Sluice grants produce and consume"),
        (["sources"], "not supported"),
        (["sinks"], "not supported"),
        (["packages"], "not supported"),
    ],
)
def test_parse_actions_refuses_with_a_reason(body, reason):
    with pytest.raises(InvalidInput) as refused:
        parse_actions(body)
    assert reason in refused.value.reason


def test_role_names():
    for role in ("app", "ops@example.com", "my.role.*", "CN=client,O=acme", "r" * 255, "a b"):
        assert check_role(role) == role
    for role in ("", " ", "  app", "app ", ".", "...", "r" * 256, "a\nb", "a\x00", "a\x7f"):
        with pytest.raises(PreconditionFailed):
            check_role(role)


def test_covers_takes_a_star_for_any_tenant_or_namespace_and_no_partial_names():
    partition = TopicName.from_full("persistent://acme/orders/t").partition(3)
    assert covers("*", "*", None, partition)
    assert covers("acme", "*", None, partition)
    assert covers("acme", "orders", "persistent://acme/orders/t", partition)
    assert not covers("acme", "orders", "persistent://acme/orders/t2", partition)
    assert not covers("acme", "order", None, partition)
    assert not covers("acm", "*", None, partition)


def test_a_subscription_list_admits_its_roles_and_an_empty_one_everybody():
    assert subscription_allowed(None, "app")
    assert subscription_allowed([], "app")
    assert subscription_allowed(["app", "audit"], "app")
    assert not subscription_allowed(["audit"], "app")
    assert not subscription_allowed(["App"], "app")  # roles are compared exactly


def test_parse_roles_sorts_deduplicates_and_refuses_what_names_no_role():
    assert parse_roles(["b", "a", "b"]) == ["a", "b"]
    assert parse_roles([]) == []
    for body, error in (
        (None, InvalidInput),
        ("a", InvalidInput),
        ({"roles": ["a"]}, InvalidInput),
        ([1], InvalidInput),
        (["a", None], InvalidInput),
        ([""], PreconditionFailed),
        ([" a"], PreconditionFailed),
        (["..."], PreconditionFailed),
        (["a\nb"], PreconditionFailed),
    ):
        with pytest.raises(error):
            parse_roles(body)
