"""The ``DispatchRate`` value object: Pulsar's four-field rate policy, parsed strictly.

JSON shape (Pulsar's ``DispatchRateImpl``)::

    {"dispatchThrottlingRateInMsg": 1000, "dispatchThrottlingRateInByte": -1,
     "relativeToPublishRate": false, "ratePeriodInSecond": 1}

A value <= 0 in a dimension means "no limit in that dimension".  A rate whose two dimensions are
both <= 0 is *unset*: resolution skips it and falls through to the next level (Pulsar's
``normalize``).  Unlike Pulsar, a missing ``ratePeriodInSecond`` means 1, not 0, and missing
rates mean -1, so a partial body never yields a nonsense period.  Types are strict: no
string-to-number or number-to-bool coercion; unknown fields are ignored as Pulsar ignores them.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from models.errors import InvalidInput

MSG = "dispatchThrottlingRateInMsg"
BYTE = "dispatchThrottlingRateInByte"
RELATIVE = "relativeToPublishRate"
PERIOD = "ratePeriodInSecond"

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
_DEFAULTS = {MSG: -1, BYTE: -1, RELATIVE: False, PERIOD: 1}


class DispatchRate(BaseModel):
    """At most ``msg`` messages and ``byte`` bytes per ``period`` seconds."""

    model_config = ConfigDict(
        frozen=True, strict=True, extra="ignore", validate_by_name=True, validate_by_alias=True
    )

    msg: int = Field(-1, alias=MSG, ge=-1, le=INT32_MAX, description="messages per period")
    byte: int = Field(-1, alias=BYTE, ge=-1, le=INT64_MAX, description="bytes per period")
    relative: bool = Field(False, alias=RELATIVE, description="add the average publish rate")
    period: int = Field(1, alias=PERIOD, ge=1, le=INT32_MAX, description="seconds per period")

    @field_validator("msg", "byte", "relative", "period", mode="before")
    @classmethod
    def _null_is_default(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            return _DEFAULTS[str(cls.model_fields[str(info.field_name)].alias)]
        return value

    @property
    def enabled(self) -> bool:
        """True when at least one dimension limits (Pulsar's ``isDispatchRateEnabled``)."""
        return self.msg > 0 or self.byte > 0

    def to_json(self) -> dict[str, Any]:
        """Pulsar's JSON field names and order."""
        return {MSG: self.msg, BYTE: self.byte, RELATIVE: self.relative, PERIOD: self.period}

    @classmethod
    def from_json(cls, body: object) -> DispatchRate:
        """Parse a decoded JSON body; raise ``InvalidInput`` with a readable reason."""
        if not isinstance(body, dict):
            raise InvalidInput("DispatchRate body must be a JSON object")
        try:
            return cls.model_validate(body)
        except ValidationError as exc:
            raise InvalidInput(describe_validation_error(exc)) from None


def normalize(rate: DispatchRate | None) -> DispatchRate | None:
    """Pulsar's ``DispatchRateImpl.normalize``: an unset rate (both <= 0) becomes None."""
    return rate if rate is not None and rate.enabled else None


def describe_validation_error(exc: ValidationError) -> str:
    """One line naming each bad field and what is wrong with it."""
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error.get("loc", ()) if p != "body") or "body"
        parts.append(f"{where}: {error.get('msg', 'invalid')}")
    return "Invalid request body: " + "; ".join(parts)
