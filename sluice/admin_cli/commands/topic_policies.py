"""``topicPolicies``: every topic policy kind of ``policy_kinds`` (dispatch rates, abuse
limits, publish and subscribe rates), with ``-g`` and ``-ap``."""

from __future__ import annotations

from sluice.admin_cli.commands.backlog_quota import register_topic_backlog_quota
from sluice.admin_cli.commands.common import add_group
from sluice.admin_cli.commands.policy_kinds import TOPIC, register_kinds


def register(commands, parents) -> None:
    """Add the ``topicPolicies`` group."""
    group = add_group(commands, "topicPolicies", "Operations on the policies of a topic")
    register_kinds(group, parents, TOPIC, global_flag=True)
    register_topic_backlog_quota(group, parents, global_flag=True)
