"""``grant-permission``, ``revoke-permission`` and ``permissions`` under ``namespaces`` and
``topics``: Pulsar's produce/consume grants, with ``pulsar-admin``'s flags (``--role``,
``--actions produce,consume``; on topics also ``-r``/``-a``, as recent ``pulsar-admin``).

The actions are sent as given: the server refuses an unknown one, or one Sluice does not
grant (``functions``, ``sources``, ``sinks``, ``packages``), with a reason naming it.

``grant-subscription-permission``, ``revoke-subscription-permission`` and
``subscription-permission`` under ``namespaces``: the roles that may use a subscription name
(``-s/--subscription``, ``-rs/--roles r1,r2``, ``-r/--role``, as ``pulsar-admin``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from sluice.admin_cli.client import segment
from sluice.admin_cli.commands.common import add_command, csv_list, dry_run_params

PathOf = Callable[[argparse.Namespace], str]


def register_permissions(
    group: argparse._SubParsersAction,
    parents,
    *,
    target: tuple[str, str],
    path_of: PathOf,
    short_flags: bool,
) -> None:
    """Add the three permission commands of a namespace or topic to ``group``.

    ``target`` is the positional argument and its help; ``path_of(args)`` the target's REST
    path; ``short_flags`` adds ``-r``/``-a`` beside ``--role``/``--actions``."""

    def permissions_path(args: argparse.Namespace) -> str:
        return f"{path_of(args)}/permissions"

    def role_path(args: argparse.Namespace) -> str:
        return f"{permissions_path(args)}/{segment(args.role)}"

    def get_permissions(args, admin):
        return admin.request("GET", permissions_path(args))

    def grant(args, admin):
        return admin.request(
            "POST", role_path(args), body=args.actions, params=dry_run_params(args)
        )

    def revoke(args, admin):
        return admin.request("DELETE", role_path(args), params=dry_run_params(args))

    what = target[0]

    def dry_run_flag(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="change nothing; print the permissions the change would leave",
        )

    def role_flag(parser: argparse.ArgumentParser, help_text: str) -> None:
        names = ("-r", "--role") if short_flags else ("--role",)
        parser.add_argument(*names, required=True, help=help_text)

    parser = add_command(
        group, "permissions", f"Get the permissions on a {what}", get_permissions, parents
    )
    parser.add_argument(target[0], help=target[1])

    parser = add_command(
        group, "grant-permission", f"Grant permissions to a role on a {what}", grant, parents
    )
    parser.add_argument(target[0], help=target[1])
    role_flag(parser, "client role to grant the actions to")
    parser.add_argument(
        *(("-a", "--actions") if short_flags else ("--actions",)),
        type=csv_list,
        required=True,
        help="actions to grant, comma-separated: produce,consume (replaces the role's actions)",
    )
    dry_run_flag(parser)

    parser = add_command(
        group, "revoke-permission", f"Revoke a role's permissions on a {what}", revoke, parents
    )
    parser.add_argument(target[0], help=target[1])
    role_flag(parser, "client role whose permissions to revoke")
    dry_run_flag(parser)


def register_subscription_permissions(
    group: argparse._SubParsersAction, parents, *, path_of: PathOf
) -> None:
    """Add the three subscription permission commands of a namespace to ``group``;
    ``path_of(args)`` is the namespace's REST path."""

    def get_lists(args, admin):
        return admin.request("GET", f"{path_of(args)}/permissions/subscription")

    def grant(args, admin):
        path = f"{path_of(args)}/permissions/subscription/{segment(args.subscription)}"
        return admin.request("POST", path, body=args.roles, params=dry_run_params(args))

    def revoke(args, admin):
        path = f"{path_of(args)}/permissions/{segment(args.subscription)}/{segment(args.role)}"
        return admin.request("DELETE", path, params=dry_run_params(args))

    def common(parser: argparse.ArgumentParser, verb: str) -> None:
        parser.add_argument("namespace", help="tenant/namespace")
        parser.add_argument("-s", "--subscription", required=True, help=f"subscription name {verb}")

    parser = add_command(
        group,
        "subscription-permission",
        "Get the roles that may use each subscription name of a namespace",
        get_lists,
        parents,
    )
    parser.add_argument("namespace", help="tenant/namespace")

    parser = add_command(
        group,
        "grant-subscription-permission",
        "Set the roles that may use a subscription name in a namespace",
        grant,
        parents,
    )
    common(parser, "whose roles to set")
    parser.add_argument(
        "-rs",
        "--roles",
        type=csv_list,
        required=True,
        help="client roles, comma-separated (replaces the subscription's roles)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="change nothing; print the lists it would leave"
    )

    parser = add_command(
        group,
        "revoke-subscription-permission",
        "Take a role out of the roles that may use a subscription name",
        revoke,
        parents,
    )
    common(parser, "whose role to revoke")
    parser.add_argument("-r", "--role", required=True, help="client role to take out")
    parser.add_argument(
        "--dry-run", action="store_true", help="change nothing; print the lists it would leave"
    )
