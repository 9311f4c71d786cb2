"""The ``DispatchRate`` value object: Pulsar's four-field rate policy, parsed strictly.

JSON shape (Pulsar's ``DispatchRateImpl``)::

    {"dispatchThrottlingRateInMsg": 1000, "dispatchThrottlingRateInByte": -1,
     "relativeToPublishRate": false, "ratePeriodInSecond": 1}

A value <= 0 in a dimension means "no limit in that dimension".  A rate whose two dimensions are
both <= 0 is *unset*: resolution skips it and falls through to the next level (Pulsar's
``normalize``).  Unlike Pulsar, a missing ``ratePeriodInSecond`` means 1, not 0, and missing
rates mean -1, so a partial body never yields a nonsense period.  Types are strict: no
string-to-number or number-to-bool coercion.  Unlike Pulsar, a body with a field it does not
know (a typo such as ``dispatchThrottlingRateInMsgs`` included) or with no field set at all is
refused with 400 (``DispatchRateBody``, ``models.json_body``) rather than stored as "no limit".
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from models.errors import InvalidInput
from models.json_body import INT32_MAX, INT64_MAX, KnownFieldsBody, check_fields

MSG = "dispatchThrottlingRateInMsg"
BYTE = "dispatchThrottlingRateInByte"
RELATIVE = "relativeToPublishRate"
PERIOD = "ratePeriodInSecond"

Model = TypeVar("Model", bound=BaseModel)
_DEFAULTS = {MSG: -1, BYTE: -1, RELATIVE: False, PERIOD: 1}
FIELDS = (MSG, BYTE, RELATIVE, PERIOD)


class DispatchRate(BaseModel):
    """At most ``msg`` messages and ``byte`` bytes per ``period`` seconds."""

    model_config = ConfigDict(
        frozen=True, strict=True, extra="forbid", validate_by_name=True, validate_by_alias=True
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
        """Parse a decoded JSON body as a client sends it (``DispatchRateBody``'s rules);
        raise ``InvalidInput`` with a readable reason."""
        if not isinstance(body, dict):
            raise InvalidInput("DispatchRate body must be a JSON object")
        try:
            return DispatchRateBody.model_validate(body).value()
        except ValidationError as exc:
            raise InvalidInput(describe_validation_error(exc)) from None


class DispatchRateBody(KnownFieldsBody, DispatchRate):
    """A ``DispatchRate`` as a client sends it: Pulsar's field names only (an unknown one is
    refused and named), and at least one of them set."""

    model_config = ConfigDict(title="DispatchRate", validate_by_name=False)
    known_fields = FIELDS
    body_name = "DispatchRate"

    def value(self) -> DispatchRate:
        """The plain value object (what is stored and compared)."""
        return DispatchRate(
            msg=self.msg, byte=self.byte, relative=self.relative, period=self.period
        )


def normalize(rate: DispatchRate | None) -> DispatchRate | None:
    """Pulsar's ``DispatchRateImpl.normalize``: an unset rate (both <= 0) becomes None."""
    return rate if rate is not None and rate.enabled else None


def describe_validation_error(exc: ValidationError) -> str:
    """One line naming each bad field and what is wrong with it."""
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error.get("loc", ()) if p != "body")
        message = error.get("msg", "invalid")
        parts.append(f"{where}: {message}" if where else message)
    return "Invalid request body: " + "; ".join(parts)


def parse_body(
    model: type[Model],
    body: object,
    what: str,
    known: tuple[str, ...],
    *,
    drop_nulls: bool = False,
) -> Model:
    """A client's JSON body as ``model``: an object of ``known`` fields only, at least one set
    (``models.json_body``); ``drop_nulls`` leaves a field sent as null to its default.
    ``InvalidInput`` (400) with a readable reason."""
    if not isinstance(body, dict):
        raise InvalidInput(f"{what} body must be a JSON object")
    try:
        check_fields(body, known, what, require_one=True)
    except PydanticCustomError as exc:
        raise InvalidInput(f"Invalid request body: {exc.message()}") from None
    if drop_nulls:
        body = {k: v for k, v in body.items() if v is not None}
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise InvalidInput(describe_validation_error(exc)) from None
