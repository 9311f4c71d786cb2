"""``topicPolicies``: every topic policy kind of ``policy_kinds`` (dispatch rates, abuse
limits, publish and subscribe rates), with ``-g`` and ``-ap``."""

from __future__ import annotations

from sluice.admin_cli.commands.backlog_quota import register_backlog_quota
from sluice.admin_cli.commands.common import add_group
from sluice.admin_cli.commands.policy_kinds import TOPIC, register_kinds
from sluice.admin_cli.names import topic_path


def register(commands, parents) -> None:
    """Add the ``topicPolicies`` group."""
    group = add_group(commands, "topicPolicies", "Operations on the policies of a topic")
    register_kinds(group, parents, TOPIC, global_flag=True)
    register_backlog_quota(
        group,
        parents,
        ("topic", "persistent://tenant/namespace/topic"),
        lambda args: topic_path(args.topic),
        topic=True,
        global_flag=True,
    )
