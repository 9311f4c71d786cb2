"""Topic-level dispatch-rate commands, shared by ``topics`` and ``topicPolicies``.

``set|get|remove-dispatch-rate TOPIC`` work on the topic's own limiter;
``set|get|remove-subscription-dispatch-rate TOPIC`` on the default of all its subscriptions,
or with ``-s SUB`` on one subscription (Pulsar's PIP-152 per-subscription rate).
"""

from __future__ import annotations

from functools import partial

from sluice.admin_cli.client import segment
from sluice.admin_cli.commands.common import add_rate_flags, rate_body
from sluice.admin_cli.commands.verbs import Policy, no_flags, register_policy
from sluice.admin_cli.names import topic_path


def _path(args, kind: str) -> str:
    base = topic_path(args.topic)
    subscription = getattr(args, "subscription", None)
    if kind == "subscriptionDispatchRate" and subscription:
        return f"{base}/{segment(subscription)}/dispatchRate"
    return f"{base}/{kind}"


def _subscription_flag(parser) -> None:
    parser.add_argument("-s", "--subscription", help="one subscription instead of all of them")


def register_rate_commands(group, parents, global_flag: bool) -> None:
    """Add the six rate commands to ``group``; ``global_flag`` adds ``-g/--global``."""
    for suffix, kind in (
        ("dispatch-rate", "dispatchRate"),
        ("subscription-dispatch-rate", "subscriptionDispatchRate"),
    ):
        policy = Policy(
            suffix=suffix,
            what=f"the topic {suffix.replace('-', ' ')}",
            target=("topic", "persistent://tenant/namespace/topic"),
            path_of=partial(_path, kind=kind),
            add_flags=add_rate_flags,
            body_of=rate_body,
            add_target_flags=_subscription_flag if kind == "subscriptionDispatchRate" else no_flags,
            applied=True,
            global_flag=global_flag,
        )
        register_policy(group, parents, policy)
