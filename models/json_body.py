"""The field rule of every JSON object a client sends: known names only, and a policy sets one.

Pulsar's JSON mapper drops a field it does not know, so a typo such as
``dispatchThrottlingRateInMsgs`` silently leaves that dimension unset while the write succeeds.
Sluice refuses it instead: a body naming a field its type does not have is a 400 that names
the field, and nothing changes.  A policy body must also set at least one of its fields (a
bare ``{}`` would otherwise store "no limit"; removing a policy is a ``DELETE``).

These checks run as pydantic ``before`` validators, so they see the object as sent.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, ClassVar

from pydantic import BaseModel, model_validator
from pydantic_core import PydanticCustomError

SHOWN_NAME_LENGTH = 64  # a hostile name is quoted, not echoed whole
# Pulsar reads a JSON number into a Java int or long: the largest value each holds.
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


def shown(name: object) -> str:
    """A client-supplied name as quoted in a reason: repr-escaped and cut short."""
    text = repr(name)
    if len(text) > SHOWN_NAME_LENGTH:
        text = text[: SHOWN_NAME_LENGTH - 3] + "..."
    return text


def check_fields(
    data: Any,
    known: Collection[str],
    what: str,
    *,
    require_one: bool = False,
    listed: str | None = None,
) -> None:
    """Refuse a JSON object with a field outside ``known`` (or, with ``require_one``, with no
    field of ``known`` set to a value).  Anything that is not an object is left to the type
    check that follows.  ``listed`` replaces the list of known fields in the reason."""
    if not isinstance(data, dict):
        return
    unknown = [name for name in data if name not in known]
    if unknown:
        raise PydanticCustomError(
            "unknown_field",
            "Unknown field {fields} in {what}: its fields are {known}",
            {
                "fields": ", ".join(shown(name) for name in unknown[:5]),
                "what": what,
                "known": listed or ", ".join(known),
            },
        )
    if require_one and all(value is None for value in data.values()):
        raise PydanticCustomError(
            "no_known_field",
            "A {what} body must set at least one of {known} (to remove it, send DELETE)",
            {"what": what, "known": ", ".join(known)},
        )


class KnownFieldsBody(BaseModel):
    """A base of a policy body as a client sends it: ``check_fields`` before validation, with
    the body's ``known_fields`` and at least one of them set.  Listed before the value type
    it extends."""

    known_fields: ClassVar[tuple[str, ...]]
    body_name: ClassVar[str]

    @model_validator(mode="before")
    @classmethod
    def _known_fields_only(cls, data: Any) -> Any:
        check_fields(data, cls.known_fields, cls.body_name, require_one=True)
        return data
