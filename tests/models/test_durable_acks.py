"""Durable acknowledgements as values: the body's checks, the stored JSON, the resolution
(namespace, else none asked for), the durability a producer takes from a policy and its own
option, and the partition's limits fields the worker writes."""

from __future__ import annotations

import pytest

from models.durable_acks import DURABLE_ACKS, NO_DURABLE_ACKS, DurableAcks
from models.errors import InvalidInput
from models.flow import value_from_json, value_to_json
from models.flow_resolution import FlowInputs, resolve_flow
from models.resolution import Level
from sluice.durable import Durability
from sluice.protocol.abuse import is_default, limit_pairs
from workers.partition import limit_values


def test_bodies_take_the_default_timeout_and_round_trip():
    value = DurableAcks.from_json({"replicas": 2})
    assert value.to_json() == {"replicas": 2, "timeoutMs": 1000}
    assert value_from_json(DURABLE_ACKS, value_to_json(value)) == value
    assert DurableAcks.from_json({"replicas": 1, "timeoutMs": 5}).timeoutMs == 5
    assert not NO_DURABLE_ACKS.enabled and value.enabled


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({}, "at least one of replicas, timeoutMs"),
        ({"replica": 1}, "Unknown field 'replica'"),
        ({"replicas": -1}, "replicas"),
        ({"replicas": 101}, "replicas"),
        ({"replicas": True}, "replicas"),
        ({"replicas": "1"}, "replicas"),
        ({"replicas": 1, "timeoutMs": 0}, "timeoutMs"),
        ({"replicas": 1, "timeoutMs": 600_001}, "timeoutMs"),
        ([1], "JSON object"),
    ],
)
def test_bad_bodies_are_refused_with_the_field_named(body, reason):
    with pytest.raises(InvalidInput, match=reason):
        DurableAcks.from_json(body)


def test_the_namespace_value_applies_else_none():
    assert resolve_flow(FlowInputs()).durable_acks.value == NO_DURABLE_ACKS
    assert resolve_flow(FlowInputs()).durable_acks.source is Level.BROKER
    asked = DurableAcks(replicas=1, timeoutMs=300)
    resolved = resolve_flow(FlowInputs(namespace={DURABLE_ACKS: asked})).durable_acks
    assert (resolved.value, resolved.source) == (asked, Level.NAMESPACE)


def test_the_worker_writes_it_into_the_partitions_limits():
    none = limit_values(resolve_flow(FlowInputs()))
    assert is_default(none) and limit_pairs(none) == []
    asked = FlowInputs(namespace={DURABLE_ACKS: DurableAcks(replicas=2, timeoutMs=300)})
    pairs = limit_pairs(limit_values(resolve_flow(asked)))
    fields = dict(zip(pairs[::2], pairs[1::2], strict=True))
    assert (fields["durableAckReplicas"], fields["durableAckTimeoutMs"]) == (2, 300)


@pytest.mark.parametrize(
    ("mine", "policy", "expected"),
    [
        (Durability(), Durability(), Durability()),
        (Durability(1, 500), Durability(), Durability(1, 500)),
        (Durability(), Durability(2, 300), Durability(2, 300)),
        (Durability(1, 500), Durability(2, 3000), Durability(2, 3000)),
        (Durability(2, 500), Durability(2, 300), Durability(2, 300)),
    ],
)
def test_a_producer_waits_for_the_stricter_of_its_option_and_the_policy(mine, policy, expected):
    assert mine.stricter(policy) == expected
