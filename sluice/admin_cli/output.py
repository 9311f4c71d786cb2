"""Printing answers as pretty JSON (the default, as ``pulsar-admin`` does), YAML or a table.

A table is for people: a list of names prints one per line; a list of objects prints as
aligned columns (a nested object summarised in its cell, a dispatch rate as ``1000 msg/s``,
floats rounded, times to the second), ``--columns`` choosing which; an object prints as
``KEY VALUE`` rows (nested keys flattened to dotted names), and a list of objects inside it
as a table of its own below.  A command
may give a view (``TableView``) that turns its answer into the tables that read best, with
the columns shown by default.  On a terminal too narrow for a table, long text wraps.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml
from tabulate import tabulate

FORMATS = ("json", "yaml", "table")
RATE_KEYS = frozenset({"dispatchThrottlingRateInMsg", "dispatchThrottlingRateInByte"})
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?$")


class OutputError(ValueError):
    """The output options do not fit the answer (e.g. an unknown column)."""


@dataclass
class Table:
    """Rows (dicts of cells) with a title, the columns shown by default, and a note below."""

    rows: list[dict[str, Any]]
    title: str = ""
    columns: list[str] | None = None
    note: str = ""


@dataclass
class TableView:
    """Turns one command's answer into tables."""

    tables: Callable[[Any], list[Table]]
    columns_help: list[str] = field(default_factory=list)


def render(
    data: Any,
    fmt: str,
    columns: list[str] | None = None,
    view: TableView | None = None,
    width: int | None = None,
) -> str:
    """The text to print for ``data`` in the format ``fmt`` (a bare string prints as is).

    ``columns`` selects table columns (``["all"]`` shows every one); ``width`` is the
    terminal's, when known, for wrapping.
    """
    if isinstance(data, str):
        return data
    if fmt == "yaml":
        return yaml.safe_dump(data, sort_keys=False, default_flow_style=False).rstrip("\n")
    if fmt == "table":
        tables = view.tables(data) if view is not None else _generic(data)
        if isinstance(tables, str):
            return tables
        return "\n\n".join(
            _print_table(t, None if _is_key_value(t) else columns, width) for t in tables
        )
    return json.dumps(data, indent=2)


def terminal_width() -> int | None:
    """Columns of the terminal standard output writes to, or None when it is not one (a pipe
    or a file gets whole lines)."""
    if sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    return None


# --- cells ----------------------------------------------------------------------------------


def number(value: float) -> str:
    """A float for people: integers as such, else three significant digits at most."""
    if math.isnan(value) or math.isinf(value):
        return str(value)
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    if abs(value) >= 100:
        return f"{value:.0f}"
    text = f"{value:.3g}"
    return text if "e" in text else text.rstrip("0").rstrip(".")


def size(count: float) -> str:
    """Bytes as B, KiB, MiB or GiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(count) < 1024 or unit == "GiB":
            return f"{number(count)} {unit}"
        count /= 1024
    return f"{number(count)} GiB"


def rate_text(rate: dict | None) -> str:
    """A dispatch rate in a few words: ``1000 msg/s``, ``10 msg + 1 MiB per 2 s``,
    ``no limit``; ``-`` when the level sets none."""
    if rate is None:
        return "-"
    msg = rate.get("dispatchThrottlingRateInMsg") or 0
    byte = rate.get("dispatchThrottlingRateInByte") or 0
    period = rate.get("ratePeriodInSecond") or 1
    parts = [f"{msg} msg"] if msg > 0 else []
    if byte > 0:
        parts.append(size(byte))
    if not parts:
        return "no limit"
    text = " + ".join(parts) + ("/s" if period == 1 else f" per {period} s")
    return f"publish rate + {text}" if rate.get("relativeToPublishRate") else text


def cell(value: Any) -> str:
    """One table cell."""
    if value is None:
        return ""
    if isinstance(value, str) and TIMESTAMP.match(value):
        return f"{value[:10]} {value[11:19]}" + ("Z" if value.endswith(("Z", "+00:00")) else "")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return number(value)
    if isinstance(value, dict):
        if value.keys() >= RATE_KEYS:
            return rate_text(value)
        return ", ".join(f"{k}={cell(v)}" for k, v in value.items())
    if isinstance(value, list):
        if all(not isinstance(item, dict | list) for item in value):
            return ", ".join(cell(item) for item in value)
        return f"({len(value)} items)"
    return str(value)


# --- generic tables ---------------------------------------------------------------------------


def _flatten(data: dict, prefix: str = "") -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value and not value.keys() >= RATE_KEYS:
            rows.extend(_flatten(value, name + "."))
        else:
            rows.append((name, value))
    return rows


def _is_records(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(i, dict) for i in value)


def _generic(data: Any) -> list[Table] | str:
    if data is None:
        return "(not set)"
    if isinstance(data, list):
        if not data:
            return "(empty)"
        if _is_records(data):
            return [Table(data)]
        return "\n".join(cell(item) for item in data)
    if not isinstance(data, dict):
        return cell(data)
    pairs = _flatten(data)
    if not pairs:
        return "(empty)"
    main = [{"KEY": k, "VALUE": v} for k, v in pairs if not _is_records(v)]
    tables = [Table(main)] if main else []
    for key, value in pairs:
        if _is_records(value):
            tables.append(Table(value, title=f"{key}:"))
    return tables


def _is_key_value(table: Table) -> bool:
    return bool(table.rows) and table.rows[0].keys() == {"KEY", "VALUE"}


def _print_table(table: Table, columns: list[str] | None, width: int | None) -> str:
    available: list[str] = []
    for row in table.rows:
        available.extend(k for k in row if k not in available)
    if columns == ["all"]:
        chosen = available
    elif columns:
        unknown = [c for c in columns if c not in available]
        if unknown and table.rows:
            raise OutputError(
                f"unknown column {', '.join(unknown)}; the columns are: {', '.join(available)}"
            )
        chosen = columns
    else:
        chosen = [c for c in table.columns if c in available] if table.columns else available
    lines = []
    if table.title:
        lines.append(table.title)
    if not table.rows:
        lines.append("(empty)")
    else:
        body = [[cell(row.get(c)) for c in chosen] for row in table.rows]
        lines.append(_aligned(chosen, body, width))
    if table.note:
        lines.append(table.note)
    return "\n".join(lines)


NUMERIC = re.compile(r"^-?\d[\d.]*(e[+-]\d+)?$")


def _aligned(headers: list[str], body: list[list[str]], width: int | None) -> str:
    # Numbers align right, everything else left.
    align = [
        "right"
        if any(r[i] for r in body) and all(NUMERIC.match(r[i]) for r in body if r[i])
        else "left"
        for i in range(len(headers))
    ]

    def draw(maxwidths=None) -> str:
        return tabulate(
            body,
            headers=headers,
            tablefmt="simple",
            disable_numparse=True,
            colalign=align,
            maxcolwidths=maxwidths,
        )

    text = draw()
    widest = max(len(line) for line in text.splitlines())
    if width is None or widest <= width:
        return text
    # Wrap the widest text columns until the table fits (or nothing more can wrap).
    natural = [max([len(h)] + [len(r[i]) for r in body]) for i, h in enumerate(headers)]
    limits = list(natural)
    excess = widest - width
    while excess > 0:
        i = max(range(len(limits)), key=lambda j: limits[j])
        if limits[i] <= 12:
            break
        cut = min(excess, limits[i] - 12)
        limits[i] -= cut
        excess -= cut
    return draw([w if w < n else None for w, n in zip(limits, natural, strict=True)])
