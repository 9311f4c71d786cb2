"""Message priority: an integer 0 (lowest) to 9 (highest), 4 when a send names none.

The scale and the default are JMS's.  A message of the default priority carries nothing (a
topic that never uses priorities stores and reads exactly what it did before); any other
priority travels as the entry field ``u`` (``PRIORITY_FIELD``).  A batch entry holds
messages of one priority only: the producer sends the batch it is building before a message
of another priority joins it.  Dispatch, eviction and stats: docs/priority.md.
"""

from __future__ import annotations

MIN_PRIORITY = 0
MAX_PRIORITY = 9
DEFAULT_PRIORITY = 4
PRIORITY_FIELD = "u"


def check_priority(priority: object) -> int:
    """``priority`` as an int, or ``ValueError`` naming the accepted range."""
    if (
        isinstance(priority, bool)
        or not isinstance(priority, int)
        or not MIN_PRIORITY <= priority <= MAX_PRIORITY
    ):
        raise ValueError(
            f"priority must be an integer from {MIN_PRIORITY} (lowest) to {MAX_PRIORITY} "
            f"(highest), got {priority!r}"
        )
    return priority


# The field's raw values of the ten priorities: the consumer's hot path looks a value up here
# (``priority_value`` for anything else) instead of calling ``int``.
PRIORITY_OF: dict[bytes, int] = {str(p).encode(): p for p in range(MIN_PRIORITY, MAX_PRIORITY + 1)}


def entry_priority(fields: dict) -> int:
    """The priority of a stream entry from its fields (bytes or str keys)."""
    return priority_value(fields.get(PRIORITY_FIELD, fields.get(PRIORITY_FIELD.encode())))


def priority_value(raw: bytes | str | None) -> int:
    """The priority an entry's priority field holds (the default when it holds none); the ten
    levels' raw values are looked up, not parsed (the consumer's hot path)."""
    level = PRIORITY_OF.get(raw)  # type: ignore[arg-type]
    if level is not None:
        return level
    if raw is None:
        return DEFAULT_PRIORITY
    try:
        return int(raw)
    except (TypeError, ValueError):
        return DEFAULT_PRIORITY
