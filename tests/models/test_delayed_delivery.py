"""``delayedDelivery``: the value's checks and its resolution, topic > namespace > broker."""

from __future__ import annotations

import pytest

from models.broker_config import BrokerConfig
from models.delayed_delivery import DELAYED_DELIVERY, DelayedDeliveryPolicies
from models.errors import InvalidInput
from models.flow import value_from_json, value_to_json
from models.flow_resolution import FlowInputs, resolve_flow
from models.resolution import Level


def test_parsing_takes_pulsars_fields_with_their_zeros():
    value = DelayedDeliveryPolicies.from_json({"active": True, "tickTime": 2000})
    assert value.to_json() == {"tickTime": 2000, "active": True, "maxDeliveryDelayInMillis": 0}
    assert DelayedDeliveryPolicies.from_json({"maxDeliveryDelayInMillis": 5}).active is False
    stored = value_to_json(value)
    assert value_from_json(DELAYED_DELIVERY, stored) == value


@pytest.mark.parametrize(
    "body",
    [{}, {"active": None}, {"active": "yes"}, {"tickTime": -1}, {"tickTime": True}, {"x": 1}, []],
)
def test_bad_bodies_are_invalid_input(body):
    with pytest.raises(InvalidInput):
        DelayedDeliveryPolicies.from_json(body)


def test_the_max_delay_applies_only_while_active():
    assert DelayedDeliveryPolicies(active=True, maxDeliveryDelayInMillis=9).max_delay_ms == 9
    assert DelayedDeliveryPolicies(active=False, maxDeliveryDelayInMillis=9).max_delay_ms == 0


def test_resolution_topic_over_namespace_over_broker():
    broker = BrokerConfig.from_overrides(
        {"delayedDeliveryTickTimeMillis": "250", "delayedDeliveryMaxDelayInMillis": "7"}
    )
    resolved = resolve_flow(FlowInputs(broker=broker)).delayed_delivery
    assert resolved.source is Level.BROKER
    assert resolved.value == DelayedDeliveryPolicies(
        active=True, tickTime=250, maxDeliveryDelayInMillis=7
    )
    off = DelayedDeliveryPolicies(active=False)
    on = DelayedDeliveryPolicies(active=True, tickTime=5)
    namespace = {DELAYED_DELIVERY: off}
    resolved = resolve_flow(FlowInputs(broker=broker, namespace=namespace)).delayed_delivery
    assert (resolved.value, resolved.source) == (off, Level.NAMESPACE)
    inputs = FlowInputs(broker=broker, namespace=namespace, topic={DELAYED_DELIVERY: on})
    resolved = resolve_flow(inputs).delayed_delivery
    assert (resolved.value, resolved.source) == (on, Level.TOPIC)
