"""``resourcegroups`` (list, get, create, update, delete, and Sluice's ``attachments``) with
pulsar-admin's flags, and the ``set-resource-group``, ``get-resource-group`` and
``remove-resource-group`` verbs of ``namespaces``, ``topics`` and ``tenants`` (tenants and
topics: Sluice's; ``--weight``: the member's weight in the group's fair split, Sluice's).

``create`` and ``update`` send only the flags given (the server fills -1, unlimited, on a
create), so an update never resets the fields it does not name.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from sluice.admin_cli.client import AdminClient, segment
from sluice.admin_cli.commands.common import add_command, add_dry_run, add_group, dry_run_params
from sluice.admin_cli.names import namespace_path, topic_path

BASE = "/admin/v2/resourcegroups"
# pulsar-admin's flags -> the body's fields.
RATE_FLAGS = (
    ("-mp", "--msg-publish-rate", "publishRateInMsgs", "messages per second from producers"),
    ("-bp", "--byte-publish-rate", "publishRateInBytes", "bytes per second from producers"),
    ("-md", "--msg-dispatch-rate", "dispatchRateInMsgs", "messages per second to consumers"),
    ("-bd", "--byte-dispatch-rate", "dispatchRateInBytes", "bytes per second to consumers"),
)


def _body(args: argparse.Namespace) -> dict:
    return {
        field: getattr(args, flag[2:].replace("-", "_"))
        for _, flag, field, _ in RATE_FLAGS
        if getattr(args, flag[2:].replace("-", "_")) is not None
    }


def _group_path(args: argparse.Namespace) -> str:
    return f"{BASE}/{segment(args.resourcegroup)}"


def _list(args, admin: AdminClient):
    return admin.request("GET", BASE)


def _get(args, admin: AdminClient):
    return admin.request("GET", _group_path(args))


def _put(args, admin: AdminClient):
    return admin.request("PUT", _group_path(args), body=_body(args), params=dry_run_params(args))


def _delete(args, admin: AdminClient):
    return admin.request("DELETE", _group_path(args), params=dry_run_params(args))


def _attachments(args, admin: AdminClient):
    return admin.request("GET", f"{_group_path(args)}/attachments")


def register(commands, parents) -> None:
    """Add the ``resourcegroups`` group."""
    group = add_group(commands, "resourcegroups", "Operations about resource groups")
    add_command(group, "list", "List the resource groups", _list, parents)
    for name, help_text, handler in (
        ("get", "Get a resource group's rates", _get),
        ("create", "Create a resource group (rates not given: -1, unlimited)", _put),
        ("update", "Update the rates given of a resource group", _put),
        ("delete", "Delete a resource group (refused while something uses it)", _delete),
        ("attachments", "List the tenants, namespaces and topics of a group", _attachments),
    ):
        parser = add_command(group, name, help_text, handler, parents)
        parser.add_argument("resourcegroup", help="resource group name")
        if name in ("create", "update"):
            for short, long, _, flag_help in RATE_FLAGS:
                parser.add_argument(short, long, type=int, default=None, help=flag_help)
        if name in ("create", "update", "delete"):
            add_dry_run(parser)


def register_attach_verbs(
    group: argparse._SubParsersAction,
    parents,
    *,
    target: tuple[str, str],
    attach_path: Callable[[argparse.Namespace, str], tuple[str, str, object]],
    base_path: Callable[[argparse.Namespace], str],
    applied: bool = False,
) -> None:
    """``set-``, ``get-`` and ``remove-resource-group`` of one level: ``target`` is the
    positional argument (name, help); ``attach_path`` gives (method, path, body) of an attach,
    ``base_path`` the path of the get and the remove."""
    level, metavar = target

    def set_group(args, admin: AdminClient):
        method, path, body = attach_path(args, args.resource_group_name)
        params = dry_run_params(args)
        if args.weight is not None:
            params["weight"] = args.weight
        return admin.request(method, path, body=body, params=params or None)

    def get_group(args, admin: AdminClient):
        params = {"applied": True} if getattr(args, "applied", False) else None
        return admin.request("GET", base_path(args), params=params)

    def remove_group(args, admin: AdminClient):
        return admin.request("DELETE", base_path(args), params=dry_run_params(args))

    parser = add_command(
        group, "set-resource-group", f"Attach a {level} to a resource group", set_group, parents
    )
    parser.add_argument(level, help=metavar)
    parser.add_argument("-rgn", "--resource-group-name", required=True, help="resource group name")
    parser.add_argument(
        "--weight", type=int, default=None, help="weight in the group's fair split (default 1)"
    )
    add_dry_run(parser)
    parser = add_command(
        group, "get-resource-group", f"Get the resource group of a {level}", get_group, parents
    )
    parser.add_argument(level, help=metavar)
    if applied:
        parser.add_argument(
            "-ap",
            "--applied",
            action="store_true",
            help="the group in force (topic, else namespace, else tenant)",
        )
    parser = add_command(
        group,
        "remove-resource-group",
        f"Detach a {level} from its resource group",
        remove_group,
        parents,
    )
    parser.add_argument(level, help=metavar)
    add_dry_run(parser)


def _attached_by_path(base_path: Callable[[argparse.Namespace], str]) -> dict:
    """The paths of a level that attaches by ``POST {base}/{group}`` (namespaces, tenants)."""
    return {
        "attach_path": lambda args, rg: ("POST", f"{base_path(args)}/{segment(rg)}", None),
        "base_path": base_path,
    }


def register_namespace_verbs(group, parents) -> None:
    """The ``namespaces`` verbs."""
    register_attach_verbs(
        group,
        parents,
        target=("namespace", "tenant/namespace"),
        **_attached_by_path(
            lambda args: f"/admin/v2/namespaces/{namespace_path(args.namespace)}/resourcegroup"
        ),
    )


def register_topic_verbs(group, parents) -> None:
    """The ``topics`` verbs (Pulsar's Java admin has them; its CLI did not)."""
    register_attach_verbs(
        group,
        parents,
        target=("topic", "persistent://tenant/namespace/topic"),
        attach_path=lambda args, rg: ("POST", topic_path(args.topic) + "/resourceGroup", rg),
        base_path=lambda args: topic_path(args.topic) + "/resourceGroup",
        applied=True,
    )


def register_tenant_verbs(group, parents) -> None:
    """The ``tenants`` verbs (Sluice: a tenant-wide group)."""
    register_attach_verbs(
        group,
        parents,
        target=("tenant", "tenant name"),
        **_attached_by_path(lambda args: f"/admin/v2/tenants/{segment(args.tenant)}/resourcegroup"),
    )
