"""Name rules for tenants, namespaces, topics and partitions."""

from __future__ import annotations

import pytest

from models.errors import PreconditionFailed
from sluice.protocol.names import (
    TopicName,
    check_cluster,
    check_namespace,
    check_subscription,
    check_tenant,
)


@pytest.mark.parametrize("name", ["acme", "a-b", "a_b", "a.b", "a=b", "a:b", "A9"])
def test_valid_names(name):
    assert check_tenant(name) == name


@pytest.mark.parametrize(
    "name",
    [
        "",
        "a b",
        "a/b",
        "a{b}",
        "é",
        "naïve",
        "x" * 256,
        "x" * 10_000,
        "a#b",
        ".",
        "..",
        "...",
        "a\n",  # a trailing newline once slipped through the pattern's "$"
        "\n",
        "a\x00",
        "a\tb",
        "a\x7f",
    ],
)
def test_invalid_names(name):
    with pytest.raises(PreconditionFailed):
        check_tenant(name)
    with pytest.raises(PreconditionFailed):
        check_namespace("ok", name)
    with pytest.raises(PreconditionFailed):
        check_cluster(name)
    with pytest.raises(PreconditionFailed):
        TopicName.parse("ok", "ok", name)


@pytest.mark.parametrize("name", [".a", "a..b", "..a"])
def test_dots_with_other_characters_are_names(name):
    assert check_tenant(name) == name
    assert TopicName.parse("ok", "ok", name).local == name


@pytest.mark.parametrize("name", ["audit", "a b", "naïve", "x/y", "a.b"])
def test_subscription_names_are_free_text(name):
    assert check_subscription(name) == name


@pytest.mark.parametrize(
    "name", ["", ".", "..", "....", "a\n", "a\x00", "\x7f", "a\x85b", "x" * 256]
)
def test_invalid_subscription_names(name):
    with pytest.raises(PreconditionFailed):
        check_subscription(name)


def test_partitions():
    topic = TopicName.from_full("persistent://acme/orders/created")
    part = topic.partition(3)
    assert part.full == "persistent://acme/orders/created-partition-3"
    assert part.partition_index == 3
    assert part.base == topic
    assert topic.partition_index == -1
    assert TopicName.from_full("acme/orders/x-partition-y").partition_index == -1


def test_only_persistent_topics():
    with pytest.raises(PreconditionFailed):
        TopicName.from_full("non-persistent://a/b/c")
    with pytest.raises(PreconditionFailed):
        TopicName.from_full("persistent://a/b")
