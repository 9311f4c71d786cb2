"""Topic-level dispatch-rate commands, shared by ``topics`` and ``topicPolicies``.

``set|get|remove-dispatch-rate TOPIC`` work on the topic's own limiter;
``set|get|remove-subscription-dispatch-rate TOPIC`` on the default of all its subscriptions,
or with ``-s SUB`` on one subscription (Pulsar's PIP-152 per-subscription rate).
"""

from __future__ import annotations

from sluice.admin_cli.client import segment
from sluice.admin_cli.commands.common import (
    add_applied,
    add_command,
    add_dry_run,
    add_global,
    add_rate_flags,
    dry_run_params,
    rate_body,
)
from sluice.admin_cli.names import topic_path


def _path(args, kind: str) -> str:
    base = topic_path(args.topic)
    subscription = getattr(args, "subscription", None)
    if kind == "subscriptionDispatchRate" and subscription:
        return f"{base}/{segment(subscription)}/dispatchRate"
    return f"{base}/{kind}"


def _scope(args) -> dict:
    return {"isGlobal": True} if getattr(args, "global_policy", False) else {}


def _handlers(kind: str):
    def get_rate(args, admin):
        params = {**_scope(args), "applied": True} if args.applied else _scope(args)
        return admin.request("GET", _path(args, kind), params=params)

    def set_rate(args, admin):
        params = {**_scope(args), **dry_run_params(args)}
        return admin.request("POST", _path(args, kind), body=rate_body(args), params=params)

    def remove_rate(args, admin):
        params = {**_scope(args), **dry_run_params(args)}
        return admin.request("DELETE", _path(args, kind), params=params)

    return get_rate, set_rate, remove_rate


def register_rate_commands(group, parents, global_flag: bool) -> None:
    """Add the six rate commands to ``group``; ``global_flag`` adds ``-g/--global``."""
    for flag_name, kind in (
        ("dispatch-rate", "dispatchRate"),
        ("subscription-dispatch-rate", "subscriptionDispatchRate"),
    ):
        get_rate, set_rate, remove_rate = _handlers(kind)
        what = flag_name.replace("-", " ")
        for verb, handler in (("set", set_rate), ("get", get_rate), ("remove", remove_rate)):
            parser = add_command(
                group, f"{verb}-{flag_name}", f"{verb.title()} the topic {what}", handler, parents
            )
            parser.add_argument("topic", help="persistent://tenant/namespace/topic")
            if kind == "subscriptionDispatchRate":
                parser.add_argument(
                    "-s", "--subscription", help="one subscription instead of all of them"
                )
            if verb == "set":
                add_rate_flags(parser)
            if verb == "get":
                add_applied(parser)
            if verb != "get":
                add_dry_run(parser)
            if global_flag:
                add_global(parser)
