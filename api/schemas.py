"""Request bodies with Pulsar's JSON field names, validated strictly.

Response bodies are plain dicts built by the services in Pulsar's shapes.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class StrictBody(BaseModel):
    """Strict types, unknown fields ignored (as Pulsar's JSON mapper ignores them)."""

    model_config = ConfigDict(strict=True, extra="ignore")


class TenantInfo(StrictBody):
    """Pulsar's ``TenantInfo``; a missing ``allowedClusters`` means the local cluster."""

    adminRoles: list[str] = Field(default_factory=list)
    allowedClusters: list[str] | None = None


class NamespacePolicies(StrictBody):
    """The parts of Pulsar's ``Policies`` accepted when creating a namespace."""

    replication_clusters: list[str] | None = None
    bundles: dict | None = None
