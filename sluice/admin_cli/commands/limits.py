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

from sluice.admin_cli.commands.verbs import Policy, register_policy, under
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


def _limit(suffix, kind, flag, target, base_of, applied, global_flag) -> Policy:
    dest = suffix.replace("-", "_")
    what = suffix.replace("-", " ")

    def add_flags(parser) -> None:
        parser.add_argument(
            flag, f"--{suffix}", dest=dest, type=int, required=True, help=f"{what} (0: none)"
        )

    return Policy(
        suffix=suffix,
        what=f"the {what}",
        target=target,
        path_of=under(base_of, kind),
        add_flags=add_flags,
        body_of=lambda args: getattr(args, dest),
        applied=applied,
        global_flag=global_flag,
    )


def register_namespace_limits(group, parents) -> None:
    """Add the namespace abuse-limit commands to ``namespaces``."""

    def base_of(args) -> str:
        return f"{NAMESPACES}/{namespace_path(args.namespace)}"

    target = ("namespace", "tenant/namespace")
    for suffix, kind, flag in NAMESPACE_LIMITS:
        register_policy(group, parents, _limit(suffix, kind, flag, target, base_of, False, False))


def register_topic_limits(group, parents, global_flag: bool) -> None:
    """Add the topic abuse-limit commands to ``topics`` or (``-g``) ``topicPolicies``."""

    def base_of(args) -> str:
        return topic_path(args.topic)

    target = ("topic", "persistent://tenant/namespace/topic")
    for suffix, kind, flag, applied in TOPIC_LIMITS:
        policy = _limit(suffix, kind, flag, target, base_of, applied, global_flag)
        register_policy(group, parents, policy)
