"""The topic publish- and subscribe-rate commands: the ``rates`` rows of the table in
``policy_kinds``."""

from __future__ import annotations

from sluice.admin_cli.commands.policy_kinds import RATES, TOPIC, register_kinds


def register_topic_rates(group, parents, global_flag: bool) -> None:
    """Add the topic publish- and subscribe-rate commands to ``topics`` or (``-g``)
    ``topicPolicies``."""
    register_kinds(group, parents, TOPIC, global_flag=global_flag, section=RATES)
