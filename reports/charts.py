"""Charts of report results: dispatch rate against the limit, and backlog, over time.

Rates are the topic's (its partitions summed), so they are drawn against the limit in force
(whichever limiter bound: broker, topic or subscription) of one partition times the topic's
partitions: its time-weighted average per window as a step line, and the band between its
minimum and maximum in the window when the limit changed.

Pure rendering: rows in (as served by ``/admin/v2/reports``), PNG bytes or a self-contained
HTML page out.  matplotlib draws without a display (the Agg backend).
"""

from __future__ import annotations

import base64
import html
import io
import math
from datetime import datetime

import matplotlib

matplotlib.use("Agg")
from matplotlib import dates as mdates
from matplotlib import pyplot as plt
from matplotlib.figure import Figure


def _times(rows: list[dict]) -> list[datetime]:
    return [datetime.fromisoformat(r["windowStart"]) for r in rows]


def _series(rows: list[dict], key: str) -> list[float]:
    """A column of ``rows`` with missing values as NaN (a gap in the line)."""
    return [math.nan if r.get(key) is None else float(r[key]) for r in rows]


def _limit_text(row: dict, prefix: str) -> str:
    """A limit cell: the time-weighted average, with the range when the limit changed."""
    avg = row.get(f"{prefix}Avg")
    if avg is None:
        return ""
    low, high = row.get(f"{prefix}Min"), row.get(f"{prefix}Max")
    text = f"{avg:.4g}"
    return text if low == high else f"{text} ({low:g}..{high:g})"


def _legend_or_empty(axes, has_rows: bool, empty: str) -> None:
    """A legend for plotted series, or a note saying there was nothing to plot."""
    if has_rows:
        axes.legend(loc="upper left")
    else:
        axes.text(0.5, 0.5, empty, ha="center", va="center", transform=axes.transAxes)


def _figure(title: str, rates: list[dict], backlog: list[dict]) -> Figure:
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    figure.suptitle(title)
    if rates:
        times = _times(rates)
        top.plot(times, [r["avgRate"] for r in rates], label="average rate", color="tab:blue")
        top.plot(
            times,
            [r["peakRate"] for r in rates],
            label="peak rate",
            color="tab:cyan",
            linestyle=":",
        )
        # One partition's limit times the topic's partitions, asleep ones included (they
        # report nothing but may dispatch as much): what the summed rates may reach.
        parts = max((r.get("partitions") or 1 for r in rates), default=1)
        limits = [v * parts for v in _series(rates, "limitPerPartitionAvg")]
        if any(not math.isnan(v) for v in limits):
            label = "limit in force" + (f", {parts} partitions summed" if parts > 1 else "")
            top.step(times, limits, where="post", label=label, color="tab:red")
            low = [v * parts for v in _series(rates, "limitPerPartitionMin")]
            high = [v * parts for v in _series(rates, "limitPerPartitionMax")]
            if any(a != b for a, b in zip(low, high, strict=True) if not math.isnan(a)):
                top.fill_between(
                    times,
                    low,
                    high,
                    step="post",
                    color="tab:red",
                    alpha=0.15,
                    label="limit min-max",
                )
    top.set_ylabel("msg/s")
    _legend_or_empty(top, bool(rates), "no rate report rows in this range")
    top.grid(alpha=0.3)
    if backlog:
        bottom.plot(
            _times(backlog),
            [r["backlogMsgs"] for r in backlog],
            color="tab:orange",
            label="backlog at window end",
        )
    bottom.set_ylabel("messages")
    _legend_or_empty(bottom, bool(backlog), "no backlog report rows in this range")
    bottom.grid(alpha=0.3)
    # A few ticks, each as precise as the span needs (seconds, minutes, dates), in UTC.
    locator = mdates.AutoDateLocator(minticks=3, maxticks=6, tz="UTC")
    bottom.xaxis.set_major_locator(locator)
    bottom.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz="UTC"))
    return figure


def render_png(title: str, rates: list[dict], backlog: list[dict]) -> bytes:
    """The chart as PNG bytes."""
    figure = _figure(title, rates, backlog)
    buffer = io.BytesIO()
    try:
        figure.savefig(buffer, format="png", dpi=100)
    finally:
        plt.close(figure)
    return buffer.getvalue()


def render_html(title: str, rates: list[dict], backlog: list[dict]) -> str:
    """A self-contained HTML page: the chart and the rows behind it."""
    image = base64.b64encode(render_png(title, rates, backlog)).decode()
    by_start = {r["windowStart"]: r for r in backlog}
    lines = []
    for r in rates:
        b = by_start.get(r["windowStart"], {})
        cells = (
            r["windowStart"],
            f"{r['avgRate']:.1f}",
            f"{r['peakRate']:.1f}",
            _limit_text(r, "limitTopic"),
            _limit_text(r, "limitPerPartition"),
            "" if r["utilisation"] is None else f"{r['utilisation']:.3f}",
            r["throttledBy"] or "",
            b.get("backlogMsgs", ""),
        )
        lines.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    head = (
        "window",
        "avg msg/s",
        "peak msg/s",
        "topic limit msg/s",
        "partition limit msg/s",
        "utilisation",
        "throttled by",
        "backlog",
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title>"
        "<style>body{font-family:sans-serif}td,th{padding:2px 8px;text-align:right}</style>"
        f"</head><body><h1>{html.escape(title)}</h1>"
        f"<img alt='rate and backlog' src='data:image/png;base64,{image}'>"
        "<table><tr>"
        + "".join(f"<th>{h}</th>" for h in head)
        + "</tr>"
        + "".join(lines)
        + "</table><p>Limits are the window's time-weighted average, with the range when the "
        "limit changed; the topic's limit is its partitions' limits summed (docs/reports.md)."
        "</p></body></html>"
    )
