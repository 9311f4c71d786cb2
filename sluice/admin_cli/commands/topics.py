"""``topics``: create, partitions, list, delete, subscriptions, stats, rates, abuse limits,
permissions, provenance."""

from __future__ import annotations

import argparse

from sluice.admin_cli.client import AdminError, segment
from sluice.admin_cli.commands.backlog_quota import register_topic_backlog_quota
from sluice.admin_cli.commands.client_rates import register_topic_rates
from sluice.admin_cli.commands.common import add_command, add_force, add_group
from sluice.admin_cli.commands.limits import register_topic_limits
from sluice.admin_cli.commands.permissions import register_permissions
from sluice.admin_cli.commands.resource_groups import register_topic_verbs
from sluice.admin_cli.commands.topic_operations import register_operation_commands
from sluice.admin_cli.commands.topic_rates import register_rate_commands
from sluice.admin_cli.names import namespace_path, topic_path
from sluice.admin_cli.views import PROVENANCE, TOPIC_STATS

PERSISTENT = "/admin/v2/persistent"


def _metadata(values: list[str] | None) -> dict[str, str]:
    properties: dict[str, str] = {}
    for item in values or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise AdminError(f"invalid metadata '{item}': expected key=value")
        properties[key] = value
    return properties


def _create(args, admin):
    properties = _metadata(args.metadata)
    return admin.request("PUT", topic_path(args.topic), body=properties or None)


def _create_partitioned(args, admin):
    return admin.request("PUT", f"{topic_path(args.topic)}/partitions", body=args.partitions)


def _update_partitioned(args, admin):
    return admin.request("POST", f"{topic_path(args.topic)}/partitions", body=args.partitions)


def _metadata_of(args, admin):
    return admin.request("GET", f"{topic_path(args.topic)}/partitions")


def _list(args, admin):
    if args.topic_domain == "non_persistent":
        return []
    params = {"bundle": args.bundle, "includeSystemTopic": args.include_system_topic or None}
    return admin.request("GET", f"{PERSISTENT}/{namespace_path(args.namespace)}", params=params)


def _list_partitioned(args, admin):
    params = {"includeSystemTopic": args.include_system_topic or None}
    path = f"{PERSISTENT}/{namespace_path(args.namespace)}/partitioned"
    return admin.request("GET", path, params=params)


def _delete(args, admin):
    params = {"force": True} if args.force else None
    return admin.request("DELETE", topic_path(args.topic), params=params)


def _delete_partitioned(args, admin):
    params = {"force": True} if args.force else None
    return admin.request("DELETE", f"{topic_path(args.topic)}/partitions", params=params)


def _subscriptions(args, admin):
    return admin.request("GET", f"{topic_path(args.topic)}/subscriptions")


def _subscription_path(args) -> str:
    return f"{topic_path(args.topic)}/subscription/{segment(args.subscription)}"


def _create_subscription(args, admin):
    return admin.request("PUT", _subscription_path(args))


def _unsubscribe(args, admin):
    params = {"force": True} if args.force else None
    return admin.request("DELETE", _subscription_path(args), params=params)


def _stats(args, admin):
    return admin.request("GET", f"{topic_path(args.topic)}/stats")


def _partitioned_stats(args, admin):
    params = {"perPartition": args.per_partition}
    return admin.request("GET", f"{topic_path(args.topic)}/partitioned-stats", params=params)


def _effective(args, admin):
    return admin.request("GET", f"{topic_path(args.topic)}/effectiveDispatchRates")


def _topic_command(group, parents, name: str, help_text: str, handler) -> argparse.ArgumentParser:
    parser = add_command(group, name, help_text, handler, parents)
    parser.add_argument("topic", help="persistent://tenant/namespace/topic")
    return parser


def _namespace_command(group, parents, name: str, help_text: str, handler):
    parser = add_command(group, name, help_text, handler, parents)
    parser.add_argument("namespace", help="tenant/namespace")
    parser.add_argument(
        "-ist", "--include-system-topic", action="store_true", help="include system topics"
    )
    return parser


def register(commands, parents) -> None:
    """Add the ``topics`` group."""
    group = add_group(commands, "topics", "Operations about persistent topics")
    _lifecycle_commands(group, parents)
    _subscription_and_stats_commands(group, parents)
    register_rate_commands(group, parents, global_flag=False)
    register_topic_limits(group, parents, global_flag=False)
    register_topic_backlog_quota(group, parents, global_flag=False)
    register_topic_rates(group, parents, global_flag=False)
    register_operation_commands(group, parents)
    register_topic_verbs(group, parents)
    register_permissions(
        group,
        parents,
        target=("topic", "persistent://tenant/namespace/topic"),
        path_of=lambda args: topic_path(args.topic),
        short_flags=True,
    )

    _topic_command(
        group,
        parents,
        "effective-dispatch-rates",
        "Every limiter of the topic and its subscriptions, and where each value comes from",
        _effective,
    ).set_defaults(table_view=PROVENANCE)


def _lifecycle_commands(group, parents) -> None:
    """Create, list and delete topics."""
    parser = _topic_command(group, parents, "create", "Create a non-partitioned topic", _create)
    parser.add_argument(
        "-m", "--metadata", action="append", metavar="KEY=VALUE", help="topic property"
    )
    for name, help_text, handler in (
        ("create-partitioned-topic", "Create a partitioned topic", _create_partitioned),
        ("update-partitioned-topic", "Grow a partitioned topic", _update_partitioned),
    ):
        parser = _topic_command(group, parents, name, help_text, handler)
        parser.add_argument(
            "-p", "--partitions", type=int, required=True, help="number of partitions"
        )
    _topic_command(
        group,
        parents,
        "get-partitioned-topic-metadata",
        "Get the partition count of a topic",
        _metadata_of,
    )

    parser = _namespace_command(group, parents, "list", "List the topics of a namespace", _list)
    parser.add_argument(
        "-td",
        "--topic-domain",
        choices=("persistent", "non_persistent"),
        default=None,
        help="topic domain (Sluice has persistent topics only)",
    )
    parser.add_argument("-b", "--bundle", help="namespace bundle")
    _namespace_command(
        group,
        parents,
        "list-partitioned-topics",
        "List the partitioned topics of a namespace",
        _list_partitioned,
    )

    parser = _topic_command(group, parents, "delete", "Delete a non-partitioned topic", _delete)
    add_force(parser, "delete even with active consumers")
    parser = _topic_command(
        group,
        parents,
        "delete-partitioned-topic",
        "Delete a partitioned topic",
        _delete_partitioned,
    )
    add_force(parser, "delete even with active consumers")


def _subscription_and_stats_commands(group, parents) -> None:
    """A topic's subscriptions and stats."""
    _topic_command(group, parents, "subscriptions", "List subscriptions", _subscriptions)
    parser = _topic_command(
        group, parents, "create-subscription", "Create a subscription", _create_subscription
    )
    parser.add_argument("-s", "--subscription", required=True, help="subscription name")
    parser = _topic_command(group, parents, "unsubscribe", "Delete a subscription", _unsubscribe)
    parser.add_argument("-s", "--subscription", required=True, help="subscription name")
    add_force(parser, "delete even with active consumers")

    parser = _topic_command(group, parents, "stats", "Stats of a topic or one partition", _stats)
    parser.set_defaults(table_view=TOPIC_STATS)
    parser = _topic_command(
        group, parents, "partitioned-stats", "Stats of a partitioned topic", _partitioned_stats
    )
    parser.set_defaults(table_view=TOPIC_STATS)
    parser.add_argument(
        "--per-partition", action="store_true", help="also show each partition's stats"
    )
