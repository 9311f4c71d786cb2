"""Response documents of the permission routes."""

from __future__ import annotations

from api.schemas import Document
from models.permissions import Action

# ``{"role": ["consume", "produce"], ...}``: every role and its actions, sorted.
Permissions = dict[str, list[Action]]
# ``{"subscription": ["role", ...], ...}``: every subscription with a role list, sorted.
SubscriptionPermissions = dict[str, list[str]]


class PermissionsDryRun(Document):
    """The answer to ``dryRun=true``: what changed and the permissions it would leave there
    (for a topic, merged with its namespace's, as ``GET .../permissions`` answers)."""

    dryRun: bool
    changed: str
    permissions: Permissions
