"""Command groups of ``sluice-admin``; each module adds its group with ``register``."""

from sluice.admin_cli.commands import (
    audit,
    brokers,
    namespaces,
    reports,
    resource_groups,
    tenants,
    topic_policies,
    topics,
)

# Pulsar's groups first, then Sluice's own; ``reports`` is kept last and separate.
GROUPS = (
    tenants,
    namespaces,
    topics,
    topic_policies,
    resource_groups,
    brokers,
    audit,
    reports,
)
