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


# The filters sent as given: (flag, query parameter, help).
_FILTERS = (
    ("--entity", "entity", "exact entity, e.g. persistent://t/ns/topic"),
    ("--entity-prefix", "entityPrefix", "entity name prefix, e.g. acme/"),
    ("--entity-type", "entityType", "e.g. topic.dispatchRate"),
    ("--role", "role", "role that made the change"),
)


def _list(args, admin):
    params = {name: getattr(args, flag[2:].replace("-", "_")) for flag, name, _ in _FILTERS}
    params["since"] = timestamp(args.since) if args.since else None
    params["until"] = timestamp(args.until) if args.until else None
    params["limit"] = args.limit
    return admin.request("GET", "/admin/v2/audit", params=params)


def register(commands, parents) -> None:
    """Add the ``audit`` group."""
    group = add_group(commands, "audit", "Read the audit log of changes")
    parser = add_command(group, "list", "Changes, newest first", _list, parents)
    for flag, _, help_text in _FILTERS:
        parser.add_argument(flag, help=help_text)
    parser.add_argument("--since", help="from this time (ISO-8601 or 30m, 1h, 2d ago)")
    parser.add_argument("--until", help="before this time (ISO-8601 or 30m, 1h, 2d ago)")
    parser.add_argument("--limit", type=int, default=None, help="at most N entries (server: 100)")
