"""Human durations such as ``90s``, ``15m``, ``1h``, ``2d`` or ``1w`` (CLI and API)."""

from __future__ import annotations

import re

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31_536_000}
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdwy]?)\s*$")


def parse_duration(text: str) -> float:
    """Seconds in ``text``; a bare number is seconds.  Raises ``ValueError`` on bad input."""
    match = _PATTERN.match(text or "")
    if not match:
        raise ValueError(f"Invalid duration '{text}': use a number with s, m, h, d, w or y")
    value = float(match.group(1)) * UNITS[match.group(2) or "s"]
    if value <= 0:
        raise ValueError(f"Invalid duration '{text}': must be positive")
    return value
