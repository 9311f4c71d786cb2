"""Table views of the answers a plain table serves badly (``--output table``).

* provenance (``topics effective-dispatch-rates``): one row per scope and limiter with the
  limit in force, the level it comes from and what every level offers, then the effective
  limits of the topic and of each subscription;
* report runs (``reports runs``, ``reports start``): id, job, status, attempts, times, error;
* reports (``reports rates``, ``reports backlog``): the columns that answer "is it keeping up,
  and what holds it back" by default; ``--columns all`` (or any list) shows the others.  The
  rate report's limits show as ``topicLimit`` and ``partitionLimit``: the time-weighted
  average with the window's range when the limit changed.
"""

from __future__ import annotations

from typing import Any

from sluice.admin_cli.output import Table, TableView, number, rate_text, size

LEVELS = ("subscription", "topic", "namespace", "broker")
LIMITER_NAMES = {
    "broker": "broker",
    "topic": "topic",
    "subscriptionDefault": "subscription (default)",
}


def _limiter_row(scope: str, limiter: str, entry: dict) -> dict[str, Any]:
    row: dict[str, Any] = {
        "scope": scope,
        "limiter": limiter,
        "limit": rate_text(entry.get("value")) if entry.get("enabled") else "no limit",
        "from": entry.get("source") or "",
    }
    offered = {level["level"]: level for level in entry.get("levels", [])}
    for level in LEVELS:
        if level in offered:
            row[level] = rate_text(offered[level]["value"]) if offered[level]["set"] else "-"
        else:
            row[level] = ""
    return row


def _limit(text: str | None, limiter: str | None) -> str:
    if text is None:
        return "no limit"
    return f"{text} ({limiter})" if limiter else text


def _effective_row(scope: str, effective: dict) -> dict[str, Any]:
    msg, byte = effective.get("msgPerSecond"), effective.get("bytePerSecond")
    return {
        "scope": scope,
        "messages": _limit(
            None if msg is None else f"{number(msg)} msg/s", effective.get("msgLimiter")
        ),
        "bytes": _limit(None if byte is None else f"{size(byte)}/s", effective.get("byteLimiter")),
    }


def provenance(answer: dict) -> list[Table]:
    """``effectiveDispatchRates`` as two tables: the limiters, then the effective limits."""
    partitions = answer.get("partitions") or 0
    per = answer.get("appliesPer", "partition")
    shape = f"{partitions} partitions" if partitions else "not partitioned"
    rows = [
        _limiter_row("topic", LIMITER_NAMES.get(name, name), entry)
        for name, entry in answer.get("limiters", {}).items()
    ]
    effective = [_effective_row("topic", answer.get("effective", {}))]
    for name, subscription in answer.get("subscriptions", {}).items():
        for limiter, entry in subscription.items():
            if limiter != "effective":
                rows.append(_limiter_row(f"sub {name}", limiter, entry))
        effective.append(_effective_row(f"sub {name}", subscription.get("effective", {})))
    note = (
        f"Limits apply per {per}: a topic of N partitions may dispatch N times the topic limit."
        if partitions
        else ""
    )
    return [
        Table(rows, title=f"{answer.get('topic', '')} ({shape}): limiters"),
        Table(effective, title="Effective limits (the lowest limiter wins)", note=note),
    ]


RATE_COLUMNS = [
    "windowStart",
    "topic",
    "subscription",
    "avgRate",
    "topicLimit",
    "partitionLimit",
    "utilisation",
    "throttledShare",
    "throttledBy",
]
BACKLOG_COLUMNS = [
    "windowStart",
    "topic",
    "subscription",
    "backlogMsgs",
    "growthPerS",
    "publishRate",
    "dispatchRate",
    "drainStatus",
    "drainSeconds",
]


def limit_range(row: dict, prefix: str) -> str:
    """A message limit of a rate report row in a few words: the time-weighted average, with
    the range when the limit changed in the window (``266.7 (200..400)``), ``no limit``."""
    avg = row.get(f"{prefix}Avg")
    if avg is None:
        return "no limit"
    low, high = row.get(f"{prefix}Min"), row.get(f"{prefix}Max")
    text = number(avg)
    if low is not None and high is not None and low != high:
        text += f" ({number(low)}..{number(high)})"
    return text


def _rate_cells(row: dict) -> dict[str, Any]:
    """The derived cells of a rate report row: its limits in words."""
    if "limitTopicAvg" not in row:
        return {}
    return {
        "topicLimit": limit_range(row, "limitTopic"),
        "partitionLimit": limit_range(row, "limitPerPartition"),
    }


def _report(columns: list[str]):
    def tables(answer: list[dict]) -> list[Table]:
        rows = [
            {
                **row,
                "topic": str(row.get("topic", "")).removeprefix("persistent://"),
                **_rate_cells(row),
            }
            for row in answer
        ]
        return [Table(rows, columns=columns)]

    return tables


RUN_COLUMNS = [
    "id",
    "job",
    "status",
    "attempt",
    "queuedAt",
    "startedAt",
    "finishedAt",
    "rows",
    "error",
]


def queued_runs(answer: dict) -> list[Table]:
    """A run request's answer: its runs, titled with the task that runs them."""
    return [
        Table(
            answer.get("runs", []), title=f"task {answer.get('taskId', '')}:", columns=RUN_COLUMNS
        )
    ]


PROVENANCE = TableView(provenance)
RUNS = TableView(lambda answer: [Table(answer, columns=RUN_COLUMNS)], RUN_COLUMNS)
QUEUED_RUNS = TableView(queued_runs, RUN_COLUMNS)
RATE_REPORT = TableView(_report(RATE_COLUMNS), RATE_COLUMNS)
BACKLOG_REPORT = TableView(_report(BACKLOG_COLUMNS), BACKLOG_COLUMNS)
