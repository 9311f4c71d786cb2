"""Broker configuration registry: defaults, dynamic keys, strict parsing."""

from __future__ import annotations

import pytest

from models.broker_config import DYNAMIC_KEYS, KEYS, BrokerConfig, dynamic_key
from models.errors import NotFound, PreconditionFailed


def test_defaults_match_pulsar():
    config = BrokerConfig.from_overrides()
    assert config.get("dispatchThrottlingRateInMsg") == 0
    assert config.get("dispatchThrottlingOnNonBacklogConsumerEnabled") is True
    assert config.get("dispatchThrottlingOnBatchMessageEnabled") is False
    assert config.get("dispatcherMaxReadBatchSize") == 100
    assert config.get("dispatcherMaxReadSizeBytes") == 5 * 1024 * 1024
    assert config.get("preciseDispatcherFlowControl") is False
    assert config.get("delayedDeliveryTickTimeMillis") == 1000


def test_delayed_delivery_is_strict_by_default_unlike_pulsar():
    """Pulsar's default is false (a delayed message may go up to a tick early); Sluice's is
    true: never before its time."""
    assert BrokerConfig.from_overrides().get("isDelayedDeliveryDeliverAtTimeStrict") is True


def test_every_dispatch_key_is_dynamic():
    dispatch = [k for k in KEYS if k.startswith(("dispatchThrottlingRate", "dispatcher"))]
    assert set(dispatch) <= set(DYNAMIC_KEYS)
    assert "dispatchThrottlingForFilteredEntriesEnabled" not in DYNAMIC_KEYS


def test_unknown_key_is_404_and_static_key_is_412():
    with pytest.raises(NotFound):
        dynamic_key("noSuchKey")
    with pytest.raises(PreconditionFailed, match="non-dynamic"):
        dynamic_key("dispatchThrottlingForFilteredEntriesEnabled")


@pytest.mark.parametrize(
    ("name", "text", "value"),
    [
        ("dispatchThrottlingRateInMsg", "100", 100),
        ("dispatchThrottlingRateInMsg", "-1", -1),
        ("dispatchThrottlingRateInByte", str(2**40), 2**40),
        ("dispatchThrottlingOnBatchMessageEnabled", "TRUE", True),
        ("dispatchThrottlingOnBatchMessageEnabled", "false", False),
    ],
)
def test_values_parse(name, text, value):
    assert dynamic_key(name).parse(text) == value


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("dispatchThrottlingRateInMsg", "abc"),
        ("dispatchThrottlingRateInMsg", "1.5"),
        ("dispatchThrottlingRateInMsg", "-2"),
        ("dispatchThrottlingRateInMsg", str(2**31)),
        ("dispatcherMaxReadBatchSize", "0"),
        ("dispatchThrottlingOnBatchMessageEnabled", "yes"),
    ],
)
def test_bad_values_are_412(name, text):
    with pytest.raises(PreconditionFailed, match="Invalid dynamic-config value"):
        dynamic_key(name).parse(text)


def test_runtime_shows_overrides_as_text():
    config = BrokerConfig.from_overrides({"dispatchThrottlingRateInMsg": "7", "gone": "x"})
    runtime = config.runtime()
    assert runtime["dispatchThrottlingRateInMsg"] == "7"
    assert runtime["dispatchThrottlingOnNonBacklogConsumerEnabled"] == "true"
    assert "gone" not in runtime
