"""Pulsar's JSON bodies as the tests write and expect them."""

from __future__ import annotations


def dispatch_rate(msg: int = -1, byte: int = -1, period: int = 1, relative: bool = False) -> dict:
    """A ``DispatchRate`` body (-1: no limit)."""
    return {
        "dispatchThrottlingRateInMsg": msg,
        "dispatchThrottlingRateInByte": byte,
        "relativeToPublishRate": relative,
        "ratePeriodInSecond": period,
    }


# A ``ResourceGroup`` as GET answers it when nothing was set (-1: unlimited).
UNLIMITED_GROUP = {
    "publishRateInMsgs": -1,
    "publishRateInBytes": -1,
    "dispatchRateInMsgs": -1,
    "dispatchRateInBytes": -1,
    "replicationDispatchRateInMsgs": -1,
    "replicationDispatchRateInBytes": -1,
}
