"""Charts of report rows: the limit drawn and tabled as a time-weighted value with its range."""

from __future__ import annotations

from reports.charts import render_html, render_png


def rate_row(start: str, avg: float, low: float, high: float, partitions: int = 4) -> dict:
    return {
        "windowStart": start,
        "avgRate": 250.0,
        "peakRate": 400.0,
        "limitTopicAvg": avg,
        "limitTopicMin": low,
        "limitTopicMax": high,
        "limitPerPartitionAvg": avg / partitions,
        "limitPerPartitionMin": low / partitions,
        "limitPerPartitionMax": high / partitions,
        "utilisation": 0.9375,
        "throttledBy": "topic",
    }


ROWS = [
    rate_row("2026-11-23T10:00:00+00:00", 16000 / 60, 200.0, 400.0),
    rate_row("2026-11-23T10:01:00+00:00", 400.0, 400.0, 400.0),
]


def test_html_shows_the_average_and_the_range_when_the_limit_changed():
    page = render_html("acme/orders/created / audit (minute)", ROWS, [])
    cells = "<td>266.7 (200..400)</td><td>66.67 (50..100)</td><td>0.938</td>"
    assert cells in page
    assert "<td>400</td><td>100</td>" in page  # a steady limit: no range


def test_png_with_a_limit_band_and_without_limits():
    none = dict.fromkeys(("limitTopicAvg", "limitTopicMin", "limitPerPartitionAvg"))
    unlimited = [{**row, **none} for row in ROWS]
    for rows in (ROWS, unlimited):
        assert render_png("chart", rows, []).startswith(b"\x89PNG")
