"""``topics`` operations on subscriptions and ownership, with pulsar-admin's verbs and flags:
``clear-backlog``, ``skip``, ``expire-messages``, ``expire-messages-all-subscriptions``,
``reset-cursor``, ``peek-messages``, ``examine-message``, ``stats-internal``,
``partitioned-stats-internal``, ``unload``, ``lookup`` and ``partitioned-lookup``.

Message ids are written as pulsar-admin writes them, ``ledgerId:entryId``; for Sluice that is
a stream id's two parts (``1700000000000:0`` is entry ``1700000000000-0``), and the stream id
itself is accepted too.
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import time
from datetime import datetime
from typing import Any

from sluice.admin_cli.client import NO_CONTENT, AdminClient, AdminError, segment
from sluice.admin_cli.commands.common import add_command
from sluice.admin_cli.names import topic_parts, topic_path
from sluice.protocol.frames import unpack_batch

DURATION = re.compile(r"^(\d+)([smhdwy]?)$", re.IGNORECASE)
UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800, "y": 31_536_000}
MESSAGE_ID = re.compile(r"^(\d+)[:-](\d+)$")
LONG_MAX = 2**63 - 1


def seconds(value: str) -> int:
    """A duration as pulsar-admin reads one: seconds, or a number with a unit (s, m, h, d, w,
    y): ``100``, ``10m``, ``3h``."""
    match = DURATION.match(value.strip())
    if match is None:
        raise argparse.ArgumentTypeError(
            f"invalid duration '{value}': use seconds or a number with a unit (10m, 3h, 2d, 1w)"
        )
    return int(match[1]) * UNIT_SECONDS[match[2].lower()]


def message_id_body(value: str, excluded: bool) -> Any:
    """The ``resetcursor`` body for ``-m``: ``latest``, ``earliest``, ``ledgerId:entryId`` or
    a stream id ``ms-seq``."""
    if value == "earliest":  # as pulsar-admin sends them: positions before and after all
        return {"ledgerId": -1, "entryId": -1, "isExcluded": excluded}
    if value == "latest":
        return {"ledgerId": LONG_MAX, "entryId": LONG_MAX, "isExcluded": excluded}
    match = MESSAGE_ID.match(value.strip())
    if match is None:
        raise AdminError(
            f"invalid message id '{value}': use ledgerId:entryId (or latest, earliest)"
        )
    return {"ledgerId": int(match[1]), "entryId": int(match[2]), "isExcluded": excluded}


def _subscription_path(args: argparse.Namespace) -> str:
    return f"{topic_path(args.topic)}/subscription/{segment(args.subscription)}"


def _clear_backlog(args, admin):
    return admin.request("POST", f"{_subscription_path(args)}/skip_all")


def _skip(args, admin):
    return admin.request("POST", f"{_subscription_path(args)}/skip/{args.count}")


def _expire(args, admin):
    return admin.request("POST", f"{_subscription_path(args)}/expireMessages/{args.expire_time}")


def _expire_all(args, admin):
    path = f"{topic_path(args.topic)}/all_subscription/expireMessages/{args.expire_time}"
    return admin.request("POST", path)


def _reset_cursor(args, admin):
    if args.message_id is not None:
        body = message_id_body(args.message_id, args.exclude_reset_position)
        return admin.request("POST", f"{_subscription_path(args)}/resetcursor", body=body)
    if args.time is not None:
        timestamp = int(time.time() * 1000) - args.time * 1000
        return admin.request("POST", f"{_subscription_path(args)}/resetcursor/{timestamp}")
    raise AdminError(
        "Either Timestamp (--time) or messageId (--messageId) has to be provided to reset cursor"
    )


def _epoch_ms(header: str | None) -> int | None:
    if not header:
        return None
    return int(datetime.fromisoformat(header.replace("Z", "+00:00")).timestamp() * 1000)


def _payload(data: bytes) -> dict[str, str]:
    try:
        return {"payload": data.decode()}
    except UnicodeDecodeError:
        return {"payloadBase64": base64.b64encode(data).decode()}


def _messages(response) -> list[dict[str, Any]]:
    """A peeked or examined message (each message of a batch entry) as JSON."""
    headers = response.headers
    position = headers["X-Pulsar-Message-ID"]
    common: dict[str, Any] = {
        "publishTime": _epoch_ms(headers.get("X-Pulsar-publish-time")),
        "eventTime": _epoch_ms(headers.get("X-Pulsar-event-time")) or 0,
    }
    if headers.get("X-Sluice-Priority") is not None:
        common["priority"] = int(headers["X-Sluice-Priority"])
    if "X-Pulsar-num-batch-message" not in headers:
        properties = json.loads(headers.get("X-Sluice-Properties", "{}"))
        message = {"messageId": position, **common}
        if headers.get("X-Pulsar-partition-key") is not None:
            message["key"] = headers["X-Pulsar-partition-key"]
        return [{**message, "properties": properties, **_payload(response.content)}]
    messages = []
    for index, (data, key, properties, event) in enumerate(unpack_batch(response.content)):
        message = {"messageId": f"{position}:{index}", **common, "eventTime": event or 0}
        if key is not None:
            message["key"] = key
        messages.append({**message, "properties": json.loads(properties or "{}"), **_payload(data)})
    return messages


def _peek(args, admin: AdminClient):
    found: list[dict[str, Any]] = []
    position = 1
    while len(found) < args.count:
        path = f"{_subscription_path(args)}/position/{position}"
        try:
            response = admin.fetch("GET", path)
        except AdminError as exc:
            if found and "(HTTP 404)" in str(exc):
                break  # fewer messages than asked for
            raise
        found.extend(_messages(response))
        position += 1
    return found[: args.count]


def _examine(args, admin: AdminClient):
    params = {"initialPosition": args.initial_position, "messagePosition": args.message_position}
    response = admin.fetch("GET", f"{topic_path(args.topic)}/examinemessage", params=params)
    messages = _messages(response)
    return messages[0] if len(messages) == 1 else messages


def _stats_internal(args, admin):
    params = {"metadata": True} if args.metadata else None
    return admin.request("GET", f"{topic_path(args.topic)}/internalStats", params=params)


def _partitioned_stats_internal(args, admin):
    return admin.request("GET", f"{topic_path(args.topic)}/partitioned-internalStats")


def _unload(args, admin):
    return admin.request("PUT", f"{topic_path(args.topic)}/unload")


def _lookup(args, admin):
    parts = "/".join(segment(p) for p in topic_parts(args.topic))
    answer = admin.request("GET", f"/lookup/v2/topic/persistent/{parts}")
    return answer["brokerUrl"] if isinstance(answer, dict) else answer


def _partitioned_lookup(args, admin):
    answer = admin.request("GET", f"{topic_path(args.topic)}/lookup")
    if answer is NO_CONTENT or "brokerUrl" in answer:
        raise AdminError(f"{args.topic} is not a partitioned topic: use lookup")
    return {name: owner.get("brokerUrl") for name, owner in answer.items()}


def register_operation_commands(group, parents) -> None:
    """Add the operation commands to the ``topics`` group."""

    def command(name: str, help_text: str, handler, subscription: bool = True):
        parser = add_command(group, name, help_text, handler, parents)
        parser.add_argument("topic", help="persistent://tenant/namespace/topic")
        if subscription:
            parser.add_argument("-s", "--subscription", required=True, help="subscription name")
        return parser

    _cursor_commands(command)
    _inspection_commands(command)


def _expire_time(parser) -> None:
    parser.add_argument(
        "-t",
        "--expireTime",
        dest="expire_time",
        type=seconds,
        required=True,
        help="expire messages older than this: seconds, or 100m, 3h, 2d, 5w",
    )


def _cursor_commands(command) -> None:
    """Commands that move a subscription's cursor: clear, skip, expire, reset."""
    command("clear-backlog", "Skip all the messages for the subscription", _clear_backlog)
    parser = command("skip", "Skip some messages for the subscription", _skip)
    parser.add_argument("-n", "--count", type=int, required=True, help="number of messages to skip")
    _expire_time(
        command(
            "expire-messages",
            "Expire messages older than the given time for the subscription",
            _expire,
        )
    )
    _expire_time(
        command(
            "expire-messages-all-subscriptions",
            "Expire messages older than the given time for every subscription",
            _expire_all,
            subscription=False,
        )
    )
    parser = command(
        "reset-cursor",
        "Reset the subscription to a position closest to a time or a message id",
        _reset_cursor,
    )
    parser.add_argument(
        "-t",
        "--time",
        type=seconds,
        help="go back this long: seconds, or 100m, 3h, 2d, 5w (now minus it)",
    )
    parser.add_argument(
        "-m",
        "--messageId",
        dest="message_id",
        help="message id to reset back to: ledgerId:entryId, latest or earliest",
    )
    parser.add_argument(
        "-e",
        "--exclude-reset-position",
        action="store_true",
        help="start after the given message id, not at it",
    )


def _inspection_commands(command) -> None:
    """Commands that read a topic (peek, examine, internal stats, lookups) or unload it."""
    parser = command("peek-messages", "Peek some messages for the subscription", _peek)
    parser.add_argument("-n", "--count", type=int, default=1, help="number of messages (default 1)")
    parser = command(
        "examine-message",
        "Examine a message by its position relative to the earliest or the latest message",
        _examine,
        subscription=False,
    )
    parser.add_argument(
        "-i",
        "--initialPosition",
        dest="initial_position",
        default="latest",
        help="latest (default) or earliest",
    )
    parser.add_argument(
        "-m",
        "--messagePosition",
        dest="message_position",
        type=int,
        default=1,
        help="position of the message (default 1)",
    )
    parser = command(
        "stats-internal",
        "Internal stats: the stream, its consumer groups and its owner",
        _stats_internal,
        subscription=False,
    )
    parser.add_argument(
        "-m", "--metadata", action="store_true", help="accepted for compatibility; no effect"
    )
    command(
        "partitioned-stats-internal",
        "Internal stats of every partition of a partitioned topic",
        _partitioned_stats_internal,
        subscription=False,
    )
    command("unload", "Unload a topic: its owner lets go, a worker takes it again", _unload, False)
    command("lookup", "Look up the worker serving a topic", _lookup, subscription=False)
    command(
        "partitioned-lookup",
        "Look up the worker serving each partition of a partitioned topic",
        _partitioned_lookup,
        subscription=False,
    )
