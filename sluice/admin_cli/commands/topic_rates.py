"""The topic dispatch-rate commands (``set|get|remove-dispatch-rate``,
``-subscription-dispatch-rate`` with ``-s SUB``): the ``dispatch`` rows of the table in
``policy_kinds``."""

from __future__ import annotations

from sluice.admin_cli.commands.policy_kinds import DISPATCH, TOPIC, register_kinds


def register_rate_commands(group, parents, global_flag: bool) -> None:
    """Add the six rate commands to ``group``; ``global_flag`` adds ``-g/--global``."""
    register_kinds(group, parents, TOPIC, global_flag=global_flag, section=DISPATCH)
