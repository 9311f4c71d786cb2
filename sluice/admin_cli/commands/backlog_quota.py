"""``set-backlog-quota``, ``get-backlog-quotas`` and ``remove-backlog-quota`` of namespaces,
topics and topic policies, with ``pulsar-admin``'s flags.

``set-backlog-quota TARGET -p POLICY [-l SIZE] [-lt TIME] [-lm MESSAGES] [-t TYPE]``:
``-p/--policy`` one of ``producer_request_hold``, ``producer_exception``,
``consumer_backlog_eviction`` (Pulsar's) or ``lowest_priority_eviction`` (Sluice:
docs/priority.md); ``-l/--limit`` a size (``10M``, ``2G``, bytes without a unit);
``-lt/--limitTime`` a time (``30s``, ``5m``, ``1h``, ``1d``, seconds without a unit);
``-lm/--limitMessages`` a count of messages (a Sluice extension); ``-t/--type``
``destination_storage`` (default) or ``message_age``.  ``get-backlog-quotas`` prints the map
of both types (``-ap`` on a topic: what applies); ``remove-backlog-quota -t TYPE`` removes one.
The admin API checks the values (the CLI passes the policy through, so the API's list is the
one that counts).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable

from sluice.admin_cli.commands.common import (
    add_applied,
    add_command,
    add_dry_run,
    add_global,
    dry_run_params,
)
from sluice.admin_cli.names import topic_path

POLICIES = (
    "producer_request_hold",
    "producer_exception",
    "consumer_backlog_eviction",
    "lowest_priority_eviction",
)
TYPES = ("destination_storage", "message_age")
_SIZE_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
_TIME_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def _amount(text: str, unit_pattern: str, units: dict[str, int], what: str, examples: str) -> int:
    """A number with an optional unit (``unit_pattern``, one group) times the unit's factor
    in ``units``; -1 stays -1 (no limit)."""
    match = re.fullmatch(r"(-1|\d+)\s*" + unit_pattern, text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"invalid {what} {text!r}: use e.g. {examples}")
    number, unit = match.groups()
    return -1 if number == "-1" else int(number) * units[unit.lower()]


def size_bytes(text: str) -> int:
    """``10M`` → bytes (1024-based, as pulsar-admin); -1 stays -1 (no limit)."""
    return _amount(text, r"([kKmMgGtT]?)[bB]?", _SIZE_UNITS, "size", "1024, 10M or 2G")


def time_seconds(text: str) -> int:
    """``1h`` → seconds; -1 stays -1 (no limit)."""
    return _amount(text, r"([sSmMhHdDwW]?)", _TIME_UNITS, "time", "30, 30s, 5m or 1h")


def _body(args: argparse.Namespace) -> dict:
    body: dict = {"policy": args.policy}
    if args.limit is not None:
        body["limitSize"] = args.limit
    if args.limit_time is not None:
        body["limitTime"] = args.limit_time
    if args.limit_messages is not None:
        body["limitMessages"] = args.limit_messages
    return body


def register_backlog_quota(
    group, parents, target: tuple[str, str], base_of: Callable, *, topic: bool, global_flag: bool
) -> None:
    """Add the three commands to ``group`` for targets whose REST path is ``base_of(args)``."""

    def scope(args) -> dict:
        return {"isGlobal": True} if getattr(args, "global_policy", False) else {}

    def set_quota(args, admin):
        params = {**scope(args), **dry_run_params(args), "backlogQuotaType": args.type}
        return admin.request(
            "POST", f"{base_of(args)}/backlogQuota", body=_body(args), params=params
        )

    def get_quotas(args, admin):
        params = scope(args)
        if getattr(args, "applied", False):
            params["applied"] = True
        return admin.request("GET", f"{base_of(args)}/backlogQuotaMap", params=params)

    def remove_quota(args, admin):
        params = {**scope(args), **dry_run_params(args), "backlogQuotaType": args.type}
        return admin.request("DELETE", f"{base_of(args)}/backlogQuota", params=params)

    parser = add_command(group, "set-backlog-quota", "Set a backlog quota", set_quota, parents)
    parser.add_argument(target[0], help=target[1])
    parser.add_argument("-l", "--limit", type=size_bytes, help="size limit (e.g. 10M, 2G)")
    parser.add_argument(
        "-lt", "--limitTime", dest="limit_time", type=time_seconds, help="time limit (e.g. 1h)"
    )
    parser.add_argument(
        "-lm",
        "--limitMessages",
        dest="limit_messages",
        type=int,
        help="limit in messages (Sluice)",
    )
    parser.add_argument(
        "-p",
        "--policy",
        required=True,
        help="retention policy: " + ", ".join(POLICIES),
    )
    parser.add_argument("-t", "--type", default=TYPES[0], help=" or ".join(TYPES))
    add_dry_run(parser)
    if global_flag:
        add_global(parser)

    parser = add_command(group, "get-backlog-quotas", "Get the backlog quotas", get_quotas, parents)
    parser.add_argument(target[0], help=target[1])
    if topic:
        add_applied(parser)
    if global_flag:
        add_global(parser)

    parser = add_command(
        group, "remove-backlog-quota", "Remove a backlog quota", remove_quota, parents
    )
    parser.add_argument(target[0], help=target[1])
    parser.add_argument("-t", "--type", default=TYPES[0], help=" or ".join(TYPES))
    add_dry_run(parser)
    if global_flag:
        add_global(parser)


def register_topic_backlog_quota(group, parents, *, global_flag: bool) -> None:
    """The three commands for a topic (``topics``, and ``topicPolicies`` with ``-g``)."""
    register_backlog_quota(
        group,
        parents,
        ("topic", "persistent://tenant/namespace/topic"),
        lambda args: topic_path(args.topic),
        topic=True,
        global_flag=global_flag,
    )
