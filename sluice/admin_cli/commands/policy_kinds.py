"""Every policy kind the CLI sets, as one table, named and flagged as ``pulsar-admin``'s
(CmdNamespaces, CmdTopics, CmdTopicPolicies).

A row is one kind at one level: the commands' suffix (``set|get|remove-<suffix>``), the REST
path segment it is stored under (the admin API's names: ``dispatchRate``, ``maxProducers``,
...), the flags of ``set`` and the body they make, and whether ``get`` takes ``-ap/--applied``.
The rows of a level are registered in their order; ``topicPolicies`` commands also take
``-g/--global``.  Adding a kind to the CLI is adding its rows here.

Values: dispatch rates take ``-md``/``-bd``/``-dt`` (and ``-rp``); a count limit a bare integer
(0: no limit); ``set-publish-rate`` ``-m/--msg-publish-rate`` and ``-b/--byte-publish-rate``
(default -1: no limit); ``set-subscribe-rate`` ``-sr/--subscribe-rate`` (default -1) and
``-st/--subscribe-rate-period`` (default 30 s).  ``set|get|remove-subscription-dispatch-rate
TOPIC`` work on the default of all its subscriptions, or with ``-s SUB`` on one subscription
(Pulsar's PIP-152 per-subscription rate).  ``set-durable-acks`` (a Sluice extension)
``-r/--replicas`` (default 1) and ``-t/--timeout-ms`` (default 1000).
``set-delayed-delivery`` ``-e/--enable`` or ``-d/--disable`` (one of them), ``-t/--time`` the
tick (default ``1s``) and ``-md/--maxDelay`` the longest delay a send may ask (default ``0``:
no limit), times as ``30s``, ``5m``, ``1h``, ``1d`` (seconds without a unit), as pulsar-admin.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sluice.admin_cli.client import segment
from sluice.admin_cli.commands.backlog_quota import time_seconds
from sluice.admin_cli.commands.common import add_rate_flags, rate_body
from sluice.admin_cli.commands.verbs import Policy, no_flags, register_policy
from sluice.admin_cli.names import namespace_path, topic_path

NAMESPACE = "namespace"
TOPIC = "topic"
# Sections: pulsar-admin's order of the commands of a group (dispatch rates, abuse limits,
# publish and subscribe rates).
DISPATCH, LIMITS, RATES = "dispatch", "limits", "rates"

TARGETS = {
    NAMESPACE: ("namespace", "tenant/namespace"),
    TOPIC: ("topic", "persistent://tenant/namespace/topic"),
}
BASES: dict[str, Callable[[argparse.Namespace], str]] = {
    NAMESPACE: lambda args: f"/admin/v2/namespaces/{namespace_path(args.namespace)}",
    TOPIC: lambda args: topic_path(args.topic),
}

# suffix -> (flags of ``set``, body of ``set``)
ValueOf = Callable[[str], tuple[Callable[[argparse.ArgumentParser], None], Callable[..., Any]]]


def dispatch_rate(_suffix: str):
    """Pulsar's ``DispatchRate`` flags."""
    return add_rate_flags, rate_body


def count(flag: str) -> ValueOf:
    """A count limit: ``flag``/``--<suffix>``, a bare integer."""

    def value_of(suffix: str):
        dest = suffix.replace("-", "_")
        what = suffix.replace("-", " ")

        def add_flags(parser) -> None:
            parser.add_argument(
                flag, f"--{suffix}", dest=dest, type=int, required=True, help=f"{what} (0: none)"
            )

        return add_flags, lambda args: getattr(args, dest)

    return value_of


@dataclass(frozen=True)
class Flag:
    """An integer flag of ``set`` and the body field it fills."""

    short: str
    long: str
    field: str
    default: int
    help: str


def flags(*flags: Flag) -> ValueOf:
    """A JSON object body, one field per integer flag."""

    def add_flags(parser) -> None:
        for flag in flags:
            parser.add_argument(
                flag.short, flag.long, type=int, default=flag.default, help=flag.help
            )

    def body_of(args) -> dict:
        return {flag.field: getattr(args, flag.long[2:].replace("-", "_")) for flag in flags}

    return lambda _suffix: (add_flags, body_of)


NO_LIMIT = "<= 0 means no limit (default -1)"
publish_rate = flags(
    Flag(
        "-m",
        "--msg-publish-rate",
        "publishThrottlingRateInMsg",
        -1,
        f"messages per second on each partition; {NO_LIMIT}",
    ),
    Flag(
        "-b",
        "--byte-publish-rate",
        "publishThrottlingRateInByte",
        -1,
        f"bytes per second on each partition; {NO_LIMIT}",
    ),
)
subscribe_rate = flags(
    Flag(
        "-sr",
        "--subscribe-rate",
        "subscribeThrottlingRatePerConsumer",
        -1,
        "subscribe requests one consumer name may make from one client host per period; "
        + NO_LIMIT,
    ),
    Flag(
        "-st", "--subscribe-rate-period", "ratePeriodInSecond", 30, "period in seconds (default 30)"
    ),
)

# A Sluice extension (``set|get|remove-durable-acks``): sends wait for replicas.
durable_acks = flags(
    Flag(
        "-r",
        "--replicas",
        "replicas",
        1,
        "replicas of the partition's Redis master that must confirm a send (default 1; 0: none)",
    ),
    Flag(
        "-t",
        "--timeout-ms",
        "timeoutMs",
        1000,
        "ms a send waits for them before it fails (default 1000)",
    ),
)


def delayed_delivery(_suffix: str):
    """Pulsar's ``DelayedDeliveryPolicies`` flags: ``-e``/``-d``, ``-t`` tick, ``-md`` max."""

    def add_flags(parser) -> None:
        # pulsar-admin: "Need to specify either --enable or --disable".
        switch = parser.add_mutually_exclusive_group(required=True)
        switch.add_argument("-e", "--enable", action="store_true", help="enable delayed delivery")
        switch.add_argument("-d", "--disable", action="store_true", help="disable delayed delivery")
        parser.add_argument(
            "-t",
            "--time",
            type=time_seconds,
            default=1,
            help="the tick: how early a delayed message may go when not strict "
            "(e.g. 1s, 10s, 1m; default 1s)",
        )
        parser.add_argument(
            "-md",
            "--maxDelay",
            dest="max_delay",
            type=time_seconds,
            default=0,
            help="the longest delay a send may ask for (e.g. 1s, 1m, 5h, 3d; default 0: no limit)",
        )

    def body_of(args) -> dict:
        return {
            "active": args.enable,
            "tickTime": args.time * 1000,
            "maxDeliveryDelayInMillis": args.max_delay * 1000,
        }

    return add_flags, body_of


@dataclass(frozen=True)
class CliKind:
    """One kind at one level.  ``subscription_segment``: the verbs take ``-s SUB``, and with
    it work on ``.../{SUB}/<subscription_segment>``; ``what``: the help's name for it."""

    level: str
    section: str
    suffix: str
    path_segment: str
    value_of: ValueOf
    applied: bool = False
    what: str | None = None
    subscription_segment: str | None = None


KINDS = (
    CliKind(NAMESPACE, DISPATCH, "dispatch-rate", "dispatchRate", dispatch_rate),
    CliKind(
        NAMESPACE, DISPATCH, "subscription-dispatch-rate", "subscriptionDispatchRate", dispatch_rate
    ),
    CliKind(NAMESPACE, LIMITS, "max-topics-per-namespace", "maxTopicsPerNamespace", count("-t")),
    CliKind(
        NAMESPACE, LIMITS, "max-subscriptions-per-topic", "maxSubscriptionsPerTopic", count("-m")
    ),
    CliKind(NAMESPACE, LIMITS, "max-producers-per-topic", "maxProducersPerTopic", count("-p")),
    CliKind(NAMESPACE, LIMITS, "max-consumers-per-topic", "maxConsumersPerTopic", count("-c")),
    CliKind(
        NAMESPACE,
        LIMITS,
        "max-consumers-per-subscription",
        "maxConsumersPerSubscription",
        count("-c"),
    ),
    CliKind(
        NAMESPACE,
        LIMITS,
        "priority-oldest-every",
        "priorityOldestEvery",
        count("-n"),
        what="the priority starvation guard (every N-th message is the oldest; 0: strict)",
    ),
    CliKind(NAMESPACE, RATES, "publish-rate", "publishRate", publish_rate),
    CliKind(NAMESPACE, RATES, "subscribe-rate", "subscribeRate", subscribe_rate),
    CliKind(
        NAMESPACE,
        RATES,
        "durable-acks",
        "durableAcks",
        durable_acks,
        what="the durable acknowledgements (replicas a send waits for)",
    ),
    CliKind(
        NAMESPACE,
        RATES,
        "delayed-delivery",
        "delayedDelivery",
        delayed_delivery,
        what="the delayed delivery policy",
    ),
    CliKind(
        NAMESPACE,
        LIMITS,
        "backlog-drain-target",
        "backlogDrainTargetSeconds",
        count("-t"),
        what="the seconds the limit advisor plans to drain a backlog in",
    ),
    CliKind(
        TOPIC,
        DISPATCH,
        "dispatch-rate",
        "dispatchRate",
        dispatch_rate,
        applied=True,
        what="the topic dispatch rate",
    ),
    CliKind(
        TOPIC,
        DISPATCH,
        "subscription-dispatch-rate",
        "subscriptionDispatchRate",
        dispatch_rate,
        applied=True,
        what="the topic subscription dispatch rate",
        subscription_segment="dispatchRate",
    ),
    CliKind(TOPIC, LIMITS, "max-producers", "maxProducers", count("-p"), applied=True),
    CliKind(TOPIC, LIMITS, "max-consumers", "maxConsumers", count("-c"), applied=True),
    CliKind(TOPIC, LIMITS, "max-subscriptions-per-topic", "maxSubscriptionsPerTopic", count("-s")),
    CliKind(
        TOPIC, LIMITS, "max-consumers-per-subscription", "maxConsumersPerSubscription", count("-c")
    ),
    CliKind(TOPIC, LIMITS, "max-message-size", "maxMessageSize", count("-m")),
    CliKind(
        TOPIC,
        LIMITS,
        "backlog-drain-target",
        "backlogDrainTargetSeconds",
        count("-t"),
        applied=True,
        what="the seconds the limit advisor plans to drain a backlog in",
    ),
    CliKind(
        TOPIC,
        LIMITS,
        "priority-oldest-every",
        "priorityOldestEvery",
        count("-n"),
        applied=True,
        what="the priority starvation guard (every N-th message is the oldest; 0: strict)",
    ),
    CliKind(TOPIC, RATES, "publish-rate", "publishRate", publish_rate, applied=True),
    CliKind(TOPIC, RATES, "subscribe-rate", "subscribeRate", subscribe_rate, applied=True),
    CliKind(
        TOPIC,
        RATES,
        "durable-acks",
        "durableAcks",
        durable_acks,
        applied=True,
        what="the durable acknowledgements (replicas a send waits for)",
    ),
    CliKind(
        TOPIC,
        RATES,
        "delayed-delivery",
        "delayedDelivery",
        delayed_delivery,
        applied=True,
        what="the delayed delivery policy",
    ),
)


def _subscription_flag(parser) -> None:
    parser.add_argument("-s", "--subscription", help="one subscription instead of all of them")


def _path_of(kind: CliKind) -> Callable[[argparse.Namespace], str]:
    base_of = BASES[kind.level]

    def path_of(args: argparse.Namespace) -> str:
        subscription = getattr(args, "subscription", None)
        if kind.subscription_segment and subscription:
            return f"{base_of(args)}/{segment(subscription)}/{kind.subscription_segment}"
        return f"{base_of(args)}/{kind.path_segment}"

    return path_of


def policy_of(kind: CliKind, global_flag: bool) -> Policy:
    """The ``Policy`` (``set|get|remove`` commands) of one row."""
    add_flags, body_of = kind.value_of(kind.suffix)
    return Policy(
        suffix=kind.suffix,
        what=kind.what or f"the {kind.suffix.replace('-', ' ')}",
        target=TARGETS[kind.level],
        path_of=_path_of(kind),
        add_flags=add_flags,
        body_of=body_of,
        add_target_flags=_subscription_flag if kind.subscription_segment else no_flags,
        applied=kind.applied,
        global_flag=global_flag,
    )


def register_kinds(
    group, parents, level: str, *, global_flag: bool = False, section: str | None = None
) -> None:
    """Add the commands of every kind at ``level`` (of one ``section`` only, when given)."""
    for kind in KINDS:
        if kind.level == level and section in (None, kind.section):
            register_policy(group, parents, policy_of(kind, global_flag))
