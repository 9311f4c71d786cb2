"""``sluice-admin``: a ``pulsar-admin``-style command line for Sluice's admin REST API.

The command groups, commands and flags follow ``pulsar-admin`` (tenants, namespaces, topics,
topicPolicies, brokers), plus Sluice's own: provenance (``topics effective-dispatch-rates``),
``--dry-run`` on every write of a policy or broker setting, ``audit list`` and ``reports``.
"""

from sluice.admin_cli.runner import main

__all__ = ["main"]
