"""Printing answers as pretty JSON (the default, as ``pulsar-admin`` does), YAML or a table.

A table shows a list of names one per line, a list of objects as aligned columns, and an
object as ``key  value`` rows with nested keys flattened to dotted paths.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

FORMATS = ("json", "yaml", "table")


def render(data: Any, fmt: str) -> str:
    """The text to print for ``data`` in the format ``fmt`` (a bare string prints as is)."""
    if isinstance(data, str):
        return data
    if fmt == "yaml":
        return yaml.safe_dump(data, sort_keys=False, default_flow_style=False).rstrip("\n")
    if fmt == "table":
        return _table(data)
    return json.dumps(data, indent=2)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _flatten(data: dict, prefix: str = "") -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            rows.extend(_flatten(value, name + "."))
        else:
            rows.append((name, value))
    return rows


def _columns(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in [header, *rows]]
    return "\n".join(line.rstrip() for line in lines)


def _table(data: Any) -> str:
    if data is None:
        return "(not set)"
    if isinstance(data, dict):
        rows = _flatten(data)
        if not rows:
            return "(empty)"
        return _columns(["KEY", "VALUE"], [[k, _cell(v)] for k, v in rows])
    if isinstance(data, list):
        if not data:
            return "(empty)"
        if all(isinstance(item, dict) for item in data):
            keys: list[str] = []
            for item in data:
                keys.extend(k for k in item if k not in keys)
            rows = [[_cell(item.get(k)) for k in keys] for item in data]
            return _columns(keys, rows)
        return "\n".join(_cell(item) for item in data)
    return _cell(data)
