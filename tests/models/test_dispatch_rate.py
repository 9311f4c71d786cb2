"""Strict parsing of Pulsar's DispatchRate JSON."""

from __future__ import annotations

import pytest

from models.dispatch_rate import DispatchRate, normalize
from models.errors import InvalidInput


def test_full_body_round_trips():
    body = {
        "dispatchThrottlingRateInMsg": 1000,
        "dispatchThrottlingRateInByte": 1048576,
        "relativeToPublishRate": True,
        "ratePeriodInSecond": 2,
    }
    assert DispatchRate.from_json(body).to_json() == body


def test_missing_fields_take_builder_defaults_and_period_one():
    parsed = DispatchRate.from_json({"dispatchThrottlingRateInMsg": 5})
    assert (parsed.msg, parsed.byte, parsed.relative, parsed.period) == (5, -1, False, 1)
    nulls = DispatchRate.from_json({"dispatchThrottlingRateInMsg": 5, "ratePeriodInSecond": None})
    assert nulls.period == 1
    assert type(parsed) is DispatchRate  # the plain value, equal to what is stored
    assert parsed == DispatchRate(msg=5)


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"dispatchThrottlingRateInMsg": 5, "x": 1}, "'x'"),
        ({"dispatchThrottlingRateInMsgs": 5}, "'dispatchThrottlingRateInMsgs'"),
        ({"unknownField": 1}, "'unknownField'"),
        ({"msg": 5}, "'msg'"),  # the Python names are not the JSON names
    ],
)
def test_unknown_fields_are_refused_and_named(body, named):
    with pytest.raises(InvalidInput) as refused:
        DispatchRate.from_json(body)
    assert f"Unknown field {named}" in refused.value.reason
    assert "dispatchThrottlingRateInMsg" in refused.value.reason  # the known ones are listed


@pytest.mark.parametrize("body", [{}, {"dispatchThrottlingRateInMsg": None}])
def test_a_body_setting_nothing_is_refused(body):
    with pytest.raises(InvalidInput) as refused:
        DispatchRate.from_json(body)
    assert "must set at least one of" in refused.value.reason


@pytest.mark.parametrize(
    "body",
    [
        {"dispatchThrottlingRateInMsg": "100"},
        {"dispatchThrottlingRateInMsg": True},
        {"dispatchThrottlingRateInMsg": 1.5},
        {"dispatchThrottlingRateInMsg": -2},
        {"dispatchThrottlingRateInByte": -5},
        {"dispatchThrottlingRateInMsg": 2**31},
        {"ratePeriodInSecond": 0},
        {"relativeToPublishRate": "true"},
        {"relativeToPublishRate": 1},
        [1, 2],
        7,
    ],
)
def test_bad_bodies_are_refused(body):
    with pytest.raises(InvalidInput):
        DispatchRate.from_json(body)


@pytest.mark.parametrize(
    ("msg", "byte", "enabled"),
    [(-1, -1, False), (0, 0, False), (0, -1, False), (1, -1, True), (-1, 1, True)],
)
def test_normalize_drops_rates_with_no_limit(msg, byte, enabled):
    value = DispatchRate(msg=msg, byte=byte)
    assert value.enabled is enabled
    assert (normalize(value) is value) is enabled
