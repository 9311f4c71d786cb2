"""``tenants``: list, get, create, update, delete."""

from __future__ import annotations

from sluice.admin_cli.client import segment
from sluice.admin_cli.commands.common import add_command, add_force, add_group, csv_list
from sluice.admin_cli.commands.resource_groups import register_tenant_verbs

BASE = "/admin/v2/tenants"


def _info(args) -> dict:
    body: dict = {"adminRoles": args.admin_roles or []}
    if args.allowed_clusters is not None:
        body["allowedClusters"] = args.allowed_clusters
    return body


def _list(args, admin):
    return admin.request("GET", BASE)


def _get(args, admin):
    return admin.request("GET", f"{BASE}/{segment(args.tenant)}")


def _create(args, admin):
    return admin.request("PUT", f"{BASE}/{segment(args.tenant)}", body=_info(args))


def _update(args, admin):
    return admin.request("POST", f"{BASE}/{segment(args.tenant)}", body=_info(args))


def _delete(args, admin):
    params = {"force": True} if args.force else None
    return admin.request("DELETE", f"{BASE}/{segment(args.tenant)}", params=params)


def _tenant_info_flags(parser) -> None:
    parser.add_argument(
        "-r", "--admin-roles", type=csv_list, default=None, help="comma-separated admin roles"
    )
    parser.add_argument(
        "-c",
        "--allowed-clusters",
        type=csv_list,
        default=None,
        help="comma-separated allowed clusters (default: the local cluster)",
    )


def register(commands, parents) -> None:
    """Add the ``tenants`` group."""
    group = add_group(commands, "tenants", "Operations about tenants")
    add_command(group, "list", "List the tenants", _list, parents)
    for name, help_text, handler in (
        ("get", "Get a tenant's admin roles and allowed clusters", _get),
        ("create", "Create a tenant", _create),
        ("update", "Replace a tenant's admin roles and allowed clusters", _update),
        ("delete", "Delete a tenant", _delete),
    ):
        parser = add_command(group, name, help_text, handler, parents)
        parser.add_argument("tenant", help="tenant name")
        if name in ("create", "update"):
            _tenant_info_flags(parser)
        if name == "delete":
            add_force(parser, "also delete the tenant's namespaces and topics")
    register_tenant_verbs(group, parents)
