"""``brokers``: dynamic configuration and health check."""

from __future__ import annotations

from sluice.admin_cli.client import segment
from sluice.admin_cli.commands.common import add_command, add_dry_run, add_group, dry_run_params

BASE = "/admin/v2/brokers"


def _update(args, admin):
    path = f"{BASE}/configuration/{segment(args.config_name)}/{segment(args.value)}"
    return admin.request("POST", path, params=dry_run_params(args))


def _delete(args, admin):
    path = f"{BASE}/configuration/{segment(args.config_name)}"
    return admin.request("DELETE", path, params=dry_run_params(args))


# The read-only configuration commands: (verb, help, path below ``configuration``).
_READS = (
    ("list-dynamic-config", "Names of the dynamic keys", ""),
    ("get-all-dynamic-config", "Values set through the API", "/values"),
    ("get-runtime-config", "Every key with its value in force", "/runtime"),
)


def _read(suffix: str):
    """The handler of a read-only configuration command."""
    return lambda args, admin: admin.request("GET", f"{BASE}/configuration{suffix}")


def _healthcheck(args, admin):
    admin.request("GET", f"{BASE}/health")
    admin.request("GET", f"{BASE}/ready")  # 503 (an error) when the database or Redis is down
    return "ok"


def _config_flag(parser) -> None:
    parser.add_argument(
        "-c", "--config", dest="config_name", required=True, help="configuration key"
    )


def register(commands, parents) -> None:
    """Add the ``brokers`` group."""
    group = add_group(commands, "brokers", "Operations about brokers")
    parser = add_command(
        group, "update-dynamic-config", "Override a dynamic configuration key", _update, parents
    )
    _config_flag(parser)
    parser.add_argument("-v", "--value", required=True, help="new value")
    add_dry_run(parser)
    parser = add_command(
        group, "delete-dynamic-config", "Reset a dynamic configuration key", _delete, parents
    )
    _config_flag(parser)
    add_dry_run(parser)
    for verb, help_text, suffix in _READS:
        add_command(group, verb, help_text, _read(suffix), parents)
    add_command(
        group,
        "healthcheck",
        "Check that the admin service and database answer",
        _healthcheck,
        parents,
    )
