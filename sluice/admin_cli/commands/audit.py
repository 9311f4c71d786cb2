"""``audit list``: read the change log (Sluice's own; Pulsar has none)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from sluice.admin_cli.client import AdminError
from sluice.admin_cli.commands.common import add_command, add_group

UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
RELATIVE = re.compile(r"^(\d+)([smhdw])$")


def timestamp(value: str, now: datetime | None = None) -> str:
    """An ISO-8601 time, or a relative one such as ``30m``, ``1h``, ``2d`` (ago)."""
    match = RELATIVE.match(value.strip())
    if match:
        now = now or datetime.now(UTC)
        delta = timedelta(**{UNITS[match.group(2)]: int(match.group(1))})
        return (now - delta).isoformat()
    try:
        datetime.fromisoformat(value)
    except ValueError:
        raise AdminError(
            f"invalid time '{value}': use ISO-8601 (2026-01-31T12:00:00Z) or 30m, 1h, 2d"
        ) from None
    return value


def _list(args, admin):
    params = {
        "entity": args.entity,
        "entityPrefix": args.entity_prefix,
        "entityType": args.entity_type,
        "role": args.role,
        "since": timestamp(args.since) if args.since else None,
        "until": timestamp(args.until) if args.until else None,
        "limit": args.limit,
    }
    return admin.request("GET", "/admin/v2/audit", params=params)


def register(commands, parents) -> None:
    """Add the ``audit`` group."""
    group = add_group(commands, "audit", "Read the audit log of changes")
    parser = add_command(group, "list", "Changes, newest first", _list, parents)
    parser.add_argument("--entity", help="exact entity, e.g. persistent://t/ns/topic")
    parser.add_argument("--entity-prefix", help="entity name prefix, e.g. acme/")
    parser.add_argument("--entity-type", help="e.g. topic.dispatchRate")
    parser.add_argument("--role", help="role that made the change")
    parser.add_argument("--since", help="from this time (ISO-8601 or 30m, 1h, 2d ago)")
    parser.add_argument("--until", help="before this time (ISO-8601 or 30m, 1h, 2d ago)")
    parser.add_argument("--limit", type=int, default=None, help="at most N entries (server: 100)")
