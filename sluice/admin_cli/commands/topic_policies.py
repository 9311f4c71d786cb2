"""``topicPolicies``: topic and subscription dispatch rates and the topic abuse limits, with
``-g`` and ``-ap``."""

from __future__ import annotations

from sluice.admin_cli.commands.client_rates import register_topic_rates
from sluice.admin_cli.commands.common import add_group
from sluice.admin_cli.commands.limits import register_topic_limits
from sluice.admin_cli.commands.topic_rates import register_rate_commands


def register(commands, parents) -> None:
    """Add the ``topicPolicies`` group."""
    group = add_group(commands, "topicPolicies", "Operations on the policies of a topic")
    register_rate_commands(group, parents, global_flag=True)
    register_topic_limits(group, parents, global_flag=True)
    register_topic_rates(group, parents, global_flag=True)
