"""The topic abuse-limit commands (``set|get|remove-max-producers``, ``-max-consumers``, ...):
the ``limits`` rows of the table in ``policy_kinds``."""

from __future__ import annotations

from sluice.admin_cli.commands.policy_kinds import LIMITS, TOPIC, register_kinds


def register_topic_limits(group, parents, global_flag: bool) -> None:
    """Add the topic abuse-limit commands to ``topics`` or (``-g``) ``topicPolicies``."""
    register_kinds(group, parents, TOPIC, global_flag=global_flag, section=LIMITS)
