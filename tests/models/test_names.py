"""Name rules for tenants, namespaces, topics and partitions."""

from __future__ import annotations

import pytest

from models.errors import PreconditionFailed
from sluice.protocol.names import TopicName, check_namespace, check_tenant


@pytest.mark.parametrize("name", ["acme", "a-b", "a_b", "a.b", "a=b", "a:b", "A9"])
def test_valid_names(name):
    assert check_tenant(name) == name


@pytest.mark.parametrize("name", ["", "a b", "a/b", "a{b}", "é", "naïve", "x" * 256, "a#b"])
def test_invalid_names(name):
    with pytest.raises(PreconditionFailed):
        check_tenant(name)
    with pytest.raises(PreconditionFailed):
        check_namespace("ok", name)


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
