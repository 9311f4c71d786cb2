"""Table views of the answers a plain table serves badly (``--output table``).

* provenance (``topics effective-dispatch-rates``): one row per scope and limiter with the
  limit in force, the level it comes from and what every level offers, then the effective
  limits of the topic and of each subscription;
* topic stats (``topics stats``, ``topics partitioned-stats``): the topic, its subscriptions,
  consumers, publishers and partitions, each a table with short column names and units;
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
TIMES = "\N{MULTIPLICATION SIGN}"
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


def _limit(text: str | None, limiter: str | None, sources: dict[str, str]) -> str:
    if text is None:
        return "no limit"
    if not limiter:
        return text
    level = sources.get(limiter)
    name = LIMITER_NAMES.get(limiter, limiter)
    return f"{text} ({level} level, {name} limiter)" if level else f"{text} ({name} limiter)"


def _effective_row(scope: str, effective: dict, sources: dict[str, str]) -> dict[str, Any]:
    msg, byte = effective.get("msgPerSecond"), effective.get("bytePerSecond")
    return {
        "scope": scope,
        "messages": _limit(
            None if msg is None else f"{number(msg)} msg/s", effective.get("msgLimiter"), sources
        ),
        "bytes": _limit(
            None if byte is None else f"{size(byte)}/s", effective.get("byteLimiter"), sources
        ),
    }


def _grouped(value: float) -> str:
    return f"{value:,.0f}" if value == int(value) else f"{value:,.2f}"


def _arithmetic(partitions: int, scopes: list[tuple[str, dict]]) -> str:
    """The footer: what the per-partition limits come to for this topic."""
    if not partitions:
        return ""
    parts = []
    for scope, effective in scopes:
        msg = effective.get("msgPerSecond")
        if msg is None:
            parts.append(f"{scope} no message limit")
        else:
            total = _grouped(partitions * msg)
            parts.append(f"{scope} {partitions} {TIMES} {_grouped(msg)} msg/s = {total} msg/s")
    return f"Limits apply per partition; over the {partitions} partitions: " + "; ".join(parts)


def provenance(answer: dict) -> list[Table]:
    """``effectiveDispatchRates`` as two tables: the limiters, then the effective limits with
    the level and limiter that set each, and the arithmetic over the topic's partitions."""
    partitions = answer.get("partitions") or 0
    shape = f"{partitions} partitions" if partitions else "not partitioned"
    limiters = answer.get("limiters", {})
    topic_sources = {name: entry.get("source") or "" for name, entry in limiters.items()}
    rows = [
        _limiter_row("topic", LIMITER_NAMES.get(name, name), entry)
        for name, entry in limiters.items()
    ]
    scopes = [("topic", answer.get("effective", {}))]
    effective = [_effective_row("topic", scopes[0][1], topic_sources)]
    for name, subscription in answer.get("subscriptions", {}).items():
        sources = dict(topic_sources)
        for limiter, entry in subscription.items():
            if limiter != "effective":
                rows.append(_limiter_row(f"sub {name}", limiter, entry))
                sources[limiter] = entry.get("source") or ""
        scopes.append((f"sub {name}", subscription.get("effective", {})))
        effective.append(_effective_row(f"sub {name}", scopes[-1][1], sources))
    return [
        Table(rows, title=f"{answer.get('topic', '')} ({shape}): limiters"),
        Table(
            effective,
            title="Effective limits (the lowest limiter wins)",
            note=_arithmetic(partitions, scopes),
        ),
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
    "dataUntil",
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


# --- topic stats (``topics stats``, ``topics partitioned-stats``) ---------------------------


def _rate(msg: Any, byte: Any) -> str:
    return f"{number(msg or 0)} msg/s, {size(byte or 0)}/s"


def _count(value: Any) -> str:
    return f"{int(value or 0):,}"


def _throttled(sub: dict) -> str:
    counts = [
        (level, sum(sub.get(f"dispatchThrottled{kind}EventsBy{key}Limit", 0) for kind in KINDS))
        for level, key in (
            ("sub", "Subscription"),
            ("topic", "Topic"),
            ("broker", "Broker"),
            ("group", "ResourceGroup"),
        )
    ]
    shown = [f"{level} {count:,}" for level, count in counts if count]
    return ", ".join(shown) if shown else "never"


KINDS = ("Msg", "Bytes")


def _topic_rows(stats: dict) -> list[dict[str, Any]]:
    rows = [
        ("rate in", _rate(stats.get("msgRateIn"), stats.get("msgThroughputIn"))),
        ("rate out", _rate(stats.get("msgRateOut"), stats.get("msgThroughputOut"))),
        ("in", f"{_count(stats.get('msgInCounter'))} msgs, {size(stats.get('bytesInCounter', 0))}"),
        (
            "out",
            f"{_count(stats.get('msgOutCounter'))} msgs, {size(stats.get('bytesOutCounter', 0))}",
        ),
        ("backlog size", size(stats.get("backlogSize", 0))),
        ("average message", size(stats.get("averageMsgSize", 0))),
        ("expired", f"{_count(stats.get('msgExpiredCounter'))} msgs"),
        ("publish throttled", f"{_count(stats.get('publishRateLimitedTimes'))} times"),
        ("publishers", _count(len(stats.get("publishers") or []))),
        ("subscriptions", _count(len(stats.get("subscriptions") or {}))),
    ]
    partitions = (stats.get("metadata") or {}).get("partitions")
    if partitions:
        rows.append(("partitions", _count(partitions)))
    if stats.get("owner"):
        rows.append(("owner", stats["owner"]))
    return [{"KEY": key, "VALUE": value} for key, value in rows]


def _subscription_rows(stats: dict) -> list[dict[str, Any]]:
    return [
        {
            "subscription": name,
            "type": sub.get("type", ""),
            "consumers": len(sub.get("consumers") or []),
            "backlog (msgs)": _count(sub.get("msgBacklog")),
            "backlog size": size(sub.get("backlogSize", 0)),
            "unacked": _count(sub.get("unackedMessages")),
            "rate out": _rate(sub.get("msgRateOut"), sub.get("msgThroughputOut")),
            "out (msgs)": _count(sub.get("msgOutCounter")),
            "acked (msgs)": _count(sub.get("msgAckCounter")),
            "expired": _count(sub.get("totalMsgExpired")),
            "throttled": _throttled(sub),
        }
        for name, sub in (stats.get("subscriptions") or {}).items()
    ]


def _consumer_rows(stats: dict) -> list[dict[str, Any]]:
    return [
        {
            "subscription": name,
            "consumer": consumer.get("consumerName", ""),
            "permits": _count(consumer.get("availablePermits")),
            "unacked": _count(consumer.get("unackedMessages")),
            "blocked": "yes" if consumer.get("blockedConsumerOnUnackedMsgs") else "no",
            "since": consumer.get("connectedSince") or "-",
        }
        for name, sub in (stats.get("subscriptions") or {}).items()
        for consumer in sub.get("consumers") or []
    ]


def _partition_rows(stats: dict) -> list[dict[str, Any]]:
    return [
        {
            "partition": name.rsplit("-partition-", 1)[-1],
            "rate in": _rate(part.get("msgRateIn"), part.get("msgThroughputIn")),
            "rate out": _rate(part.get("msgRateOut"), part.get("msgThroughputOut")),
            "in (msgs)": _count(part.get("msgInCounter")),
            "backlog size": size(part.get("backlogSize", 0)),
            "owner": part.get("owner") or "-",
        }
        for name, part in (stats.get("partitions") or {}).items()
    ]


def topic_stats(answer: dict) -> list[Table]:
    """A topic's stats as tables: the topic, its subscriptions, their consumers, its
    publishers and (``--per-partition``) its partitions; every cell filled, with units."""
    tables = [Table(_topic_rows(answer), title="topic")]
    subscriptions = _subscription_rows(answer)
    if subscriptions:
        tables.append(Table(subscriptions, title="subscriptions"))
    consumers = _consumer_rows(answer)
    if consumers:
        tables.append(Table(consumers, title="consumers"))
    publishers = [
        {
            "producer": p.get("producerName", ""),
            "rate in": _rate(p.get("msgRateIn"), p.get("msgThroughputIn")),
            "since": p.get("connectedSince") or "-",
        }
        for p in answer.get("publishers") or []
    ]
    if publishers:
        tables.append(Table(publishers, title="publishers"))
    partitions = _partition_rows(answer)
    if partitions:
        tables.append(Table(partitions, title="partitions"))
    return tables


TOPIC_STATS = TableView(topic_stats)


# --- the limit advisor (``reports advice``) -------------------------------------------------

ADVICE_COLUMNS = [
    "topic",
    "subscription",
    "publishRateP95",
    "backlogMsgs",
    "targetSeconds",
    "capacity",
    "limitPerPartition",
    "perPartition",
    "findings",
]


def advice_tables(answer: dict) -> list[Table]:
    """The advice: one row per subscription (the arithmetic's inputs, the recommendation per
    partition, the findings), then one per place a limit is set."""
    rows = [
        {
            "topic": str(sub["topic"]).removeprefix("persistent://"),
            "subscription": sub["subscription"],
            "publishRateP95": number(sub["publishRateP95"]),
            "backlogMsgs": sub["backlogMsgs"],
            "targetSeconds": sub["recommendation"]["targetSeconds"],
            "capacity": "-" if sub["capacity"] is None else number(sub["capacity"]),
            "limitPerPartition": "-"
            if sub["limitPerPartition"] is None
            else number(sub["limitPerPartition"]),
            "perPartition": sub["recommendation"]["perPartition"],
            "findings": "; ".join(f["text"] for f in sub["findings"]),
        }
        for sub in answer.get("subscriptions", [])
    ]
    limits = [
        {
            "level": place["level"],
            "kind": place["kind"],
            "path": place["path"],
            "current": place["currentPerPartition"],
            "recommended": place["perPartition"],
        }
        for place in answer.get("limits", [])
    ]
    return [
        Table(rows, title="subscriptions (msg/s; limits per partition):", columns=ADVICE_COLUMNS),
        Table(
            limits,
            title="where to apply:",
            columns=["level", "kind", "path", "current", "recommended"],
        ),
    ]


ADVICE = TableView(advice_tables, ADVICE_COLUMNS)
