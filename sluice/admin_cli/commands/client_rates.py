"""Publish- and subscribe-rate commands, named and flagged as ``pulsar-admin``'s
(CmdNamespaces, CmdTopics, CmdTopicPolicies).

``set-publish-rate`` takes ``-m/--msg-publish-rate`` and ``-b/--byte-publish-rate`` (default
-1: no limit), ``set-subscribe-rate`` ``-sr/--subscribe-rate`` (default -1) and
``-st/--subscribe-rate-period`` (default 30 s); ``get-`` and ``remove-`` take only the target.
On topics, ``get-subscribe-rate`` takes ``-ap/--applied`` as in pulsar-admin, and so does
``get-publish-rate`` (a Sluice extension); ``topicPolicies`` commands take ``-g/--global``.
"""

from __future__ import annotations

from collections.abc import Callable

from sluice.admin_cli.commands.verbs import Policy, register_policy, under
from sluice.admin_cli.names import namespace_path, topic_path

NAMESPACES = "/admin/v2/namespaces"


def _publish_flags(parser) -> None:
    parser.add_argument(
        "-m",
        "--msg-publish-rate",
        type=int,
        default=-1,
        help="messages per second on each partition; <= 0 means no limit (default -1)",
    )
    parser.add_argument(
        "-b",
        "--byte-publish-rate",
        type=int,
        default=-1,
        help="bytes per second on each partition; <= 0 means no limit (default -1)",
    )


def _publish_body(args) -> dict:
    return {
        "publishThrottlingRateInMsg": args.msg_publish_rate,
        "publishThrottlingRateInByte": args.byte_publish_rate,
    }


def _subscribe_flags(parser) -> None:
    parser.add_argument(
        "-sr",
        "--subscribe-rate",
        type=int,
        default=-1,
        help="subscribe requests one consumer name may make from one client host per period; "
        "<= 0 means no limit "
        "(default -1)",
    )
    parser.add_argument(
        "-st",
        "--subscribe-rate-period",
        type=int,
        default=30,
        help="period in seconds (default 30)",
    )


def _subscribe_body(args) -> dict:
    return {
        "subscribeThrottlingRatePerConsumer": args.subscribe_rate,
        "ratePeriodInSecond": args.subscribe_rate_period,
    }


# command suffix -> (REST path, flags of ``set``, body of ``set``)
RATES: dict[str, tuple[str, Callable, Callable[..., dict]]] = {
    "publish-rate": ("publishRate", _publish_flags, _publish_body),
    "subscribe-rate": ("subscribeRate", _subscribe_flags, _subscribe_body),
}


def _register(group, parents, target, base_of, on_topic: bool, global_flag: bool) -> None:
    for suffix, (kind, add_flags, body_of) in RATES.items():
        policy = Policy(
            suffix=suffix,
            what=f"the {suffix.replace('-', ' ')}",
            target=target,
            path_of=under(base_of, kind),
            add_flags=add_flags,
            body_of=body_of,
            applied=on_topic,
            global_flag=global_flag,
        )
        register_policy(group, parents, policy)


def register_namespace_rates(group, parents) -> None:
    """Add the namespace publish- and subscribe-rate commands to ``namespaces``."""

    def base_of(args) -> str:
        return f"{NAMESPACES}/{namespace_path(args.namespace)}"

    _register(group, parents, ("namespace", "tenant/namespace"), base_of, False, False)


def register_topic_rates(group, parents, global_flag: bool) -> None:
    """Add the topic publish- and subscribe-rate commands to ``topics`` or (``-g``)
    ``topicPolicies``."""

    def base_of(args) -> str:
        return topic_path(args.topic)

    target = ("topic", "persistent://tenant/namespace/topic")
    _register(group, parents, target, base_of, True, global_flag)
