"""``namespaces``: list, create, delete, policies, topics, permissions (subscription
permissions too), and the namespace
policy kinds of ``policy_kinds`` (dispatch rates, abuse limits, publish and subscribe rates)."""

from __future__ import annotations

from sluice.admin_cli.client import segment
from sluice.admin_cli.commands.backlog_quota import register_backlog_quota
from sluice.admin_cli.commands.common import add_command, add_force, add_group, csv_list
from sluice.admin_cli.commands.permissions import (
    register_permissions,
    register_subscription_permissions,
)
from sluice.admin_cli.commands.policy_kinds import NAMESPACE, register_kinds
from sluice.admin_cli.commands.resource_groups import register_namespace_verbs
from sluice.admin_cli.names import namespace_path

BASE = "/admin/v2/namespaces"


def _ns(args) -> str:
    return f"{BASE}/{namespace_path(args.namespace)}"


def _list(args, admin):
    return admin.request("GET", f"{BASE}/{segment(args.tenant)}")


def _create(args, admin):
    body: dict = {}
    if args.clusters:
        body["replication_clusters"] = args.clusters
    if args.bundles is not None:
        body["bundles"] = {"numBundles": args.bundles}
    return admin.request("PUT", _ns(args), body=body or None)


def _delete(args, admin):
    return admin.request("DELETE", _ns(args), params={"force": True} if args.force else None)


def _policies(args, admin):
    return admin.request("GET", _ns(args))


def _topics(args, admin):
    return admin.request("GET", f"{_ns(args)}/topics")


def register(commands, parents) -> None:
    """Add the ``namespaces`` group."""
    group = add_group(commands, "namespaces", "Operations about namespaces")
    parser = add_command(group, "list", "List the namespaces of a tenant", _list, parents)
    parser.add_argument("tenant", help="tenant name")

    parser = add_command(group, "create", "Create a namespace", _create, parents)
    parser.add_argument("namespace", help="tenant/namespace")
    parser.add_argument("-c", "--clusters", type=csv_list, help="comma-separated clusters")
    parser.add_argument("-b", "--bundles", type=int, help="number of bundles")

    parser = add_command(group, "delete", "Delete a namespace", _delete, parents)
    parser.add_argument("namespace", help="tenant/namespace")
    add_force(parser, "also delete the namespace's topics")

    for name, help_text, handler in (
        ("policies", "Get the policies of a namespace", _policies),
        ("topics", "List the topics of a namespace", _topics),
    ):
        add_command(group, name, help_text, handler, parents).add_argument(
            "namespace", help="tenant/namespace"
        )

    register_kinds(group, parents, NAMESPACE)
    register_namespace_verbs(group, parents)
    register_backlog_quota(
        group, parents, ("namespace", "tenant/namespace"), _ns, topic=False, global_flag=False
    )
    register_permissions(
        group,
        parents,
        target=("namespace", "tenant/namespace"),
        path_of=_ns,
        short_flags=False,
    )
    register_subscription_permissions(group, parents, path_of=_ns)
