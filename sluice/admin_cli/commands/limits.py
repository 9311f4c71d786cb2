"""Abuse-limit commands, named and flagged as ``pulsar-admin``'s (CmdNamespaces, CmdTopics,
CmdTopicPolicies).

``namespaces set|get|remove-max-topics-per-namespace`` (``-t``), ``-max-subscriptions-per-topic``
(``-m``), ``-max-producers-per-topic`` (``-p``), ``-max-consumers-per-topic`` (``-c``) and
``-max-consumers-per-subscription`` (``-c``); ``topics`` and ``topicPolicies``
``set|get|remove-max-producers`` (``-p``), ``-max-consumers`` (``-c``),
``-max-subscriptions-per-topic`` (``-s``), ``-max-consumers-per-subscription`` (``-c``) and
``-max-message-size`` (``-m``).  The value is sent as a bare integer; 0 means no limit.
"""

from __future__ import annotations

from sluice.admin_cli.commands.common import (
    add_applied,
    add_command,
    add_dry_run,
    add_global,
    dry_run_params,
)
from sluice.admin_cli.names import namespace_path, topic_path

NAMESPACES = "/admin/v2/namespaces"

# (command suffix, REST path, short flag)
NAMESPACE_LIMITS = (
    ("max-topics-per-namespace", "maxTopicsPerNamespace", "-t"),
    ("max-subscriptions-per-topic", "maxSubscriptionsPerTopic", "-m"),
    ("max-producers-per-topic", "maxProducersPerTopic", "-p"),
    ("max-consumers-per-topic", "maxConsumersPerTopic", "-c"),
    ("max-consumers-per-subscription", "maxConsumersPerSubscription", "-c"),
)
# (command suffix, REST path, short flag, whether ``get`` takes -ap/--applied)
TOPIC_LIMITS = (
    ("max-producers", "maxProducers", "-p", True),
    ("max-consumers", "maxConsumers", "-c", True),
    ("max-subscriptions-per-topic", "maxSubscriptionsPerTopic", "-s", False),
    ("max-consumers-per-subscription", "maxConsumersPerSubscription", "-c", False),
    ("max-message-size", "maxMessageSize", "-m", False),
)


def _handlers(path_of, kind: str, dest: str, global_flag: bool):
    def scope(args) -> dict:
        return {"isGlobal": True} if global_flag and args.global_policy else {}

    def get_limit(args, admin):
        params = scope(args)
        if getattr(args, "applied", False):
            params["applied"] = True
        return admin.request("GET", f"{path_of(args)}/{kind}", params=params)

    def set_limit(args, admin):
        params = {**scope(args), **dry_run_params(args)}
        path = f"{path_of(args)}/{kind}"
        return admin.request("POST", path, body=getattr(args, dest), params=params)

    def remove_limit(args, admin):
        params = {**scope(args), **dry_run_params(args)}
        return admin.request("DELETE", f"{path_of(args)}/{kind}", params=params)

    return {"set": set_limit, "get": get_limit, "remove": remove_limit}


def _add(group, parents, suffix, kind, flag, target, path_of, applied, global_flag) -> None:
    dest = suffix.replace("-", "_")
    what = suffix.replace("-", " ")
    handlers = _handlers(path_of, kind, dest, global_flag)
    for verb in ("set", "get", "remove"):
        parser = add_command(
            group, f"{verb}-{suffix}", f"{verb.title()} the {what}", handlers[verb], parents
        )
        parser.add_argument(target[0], help=target[1])
        if verb == "set":
            parser.add_argument(
                flag, f"--{suffix}", dest=dest, type=int, required=True, help=f"{what} (0: none)"
            )
        if verb == "get" and applied:
            add_applied(parser)
        if verb != "get":
            add_dry_run(parser)
        if global_flag:
            add_global(parser)


def register_namespace_limits(group, parents) -> None:
    """Add the namespace abuse-limit commands to ``namespaces``."""

    def path_of(args) -> str:
        return f"{NAMESPACES}/{namespace_path(args.namespace)}"

    for suffix, kind, flag in NAMESPACE_LIMITS:
        target = ("namespace", "tenant/namespace")
        _add(group, parents, suffix, kind, flag, target, path_of, False, False)


def register_topic_limits(group, parents, global_flag: bool) -> None:
    """Add the topic abuse-limit commands to ``topics`` or (``-g``) ``topicPolicies``."""

    def path_of(args) -> str:
        return topic_path(args.topic)

    for suffix, kind, flag, applied in TOPIC_LIMITS:
        target = ("topic", "persistent://tenant/namespace/topic")
        _add(group, parents, suffix, kind, flag, target, path_of, applied, global_flag)
