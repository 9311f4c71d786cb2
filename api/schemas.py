"""Request bodies and shared response documents, with Pulsar's JSON field names.

Request bodies are validated strictly.  Response documents declare every field in the order
the API writes it and forbid any other, so a route that drifts from its declared shape fails
loudly instead of answering something its OpenAPI schema does not describe.
"""

from __future__ import annotations

from typing import Any

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


class Document(BaseModel):
    """A response body: exactly the declared fields, in the declared order."""

    model_config = ConfigDict(extra="forbid")


class DispatchRateDocument(Document):
    """Pulsar's ``DispatchRateImpl``."""

    dispatchThrottlingRateInMsg: int
    dispatchThrottlingRateInByte: int
    relativeToPublishRate: bool
    ratePeriodInSecond: int


class BacklogQuotaDocument(Document):
    """Pulsar's ``BacklogQuotaImpl`` (``limit`` repeats ``limitSize``) plus ``limitMessages``."""

    limit: int
    limitSize: int
    limitTime: int
    limitMessages: int
    policy: str


class TenantDocument(Document):
    """Pulsar's ``TenantInfo`` as answered."""

    adminRoles: list[str]
    allowedClusters: list[str]


class ClusterDocument(Document):
    """Pulsar's ``ClusterData``."""

    serviceUrl: str | None
    brokerServiceUrl: str | None


class PoliciesDocument(Document):
    """The fields of Pulsar's namespace ``Policies`` that Sluice keeps."""

    auth_policies: dict[str, dict[str, Any]]
    replication_clusters: list[str]
    bundles: dict[str, Any]
    backlog_quota_map: dict[str, BacklogQuotaDocument]
    message_ttl_in_seconds: int | None
    max_unacked_messages_per_subscription: int | None
    max_unacked_messages_per_consumer: int | None
    clusterDispatchRate: dict[str, DispatchRateDocument]
    topicDispatchRate: dict[str, DispatchRateDocument]
    subscriptionDispatchRate: dict[str, DispatchRateDocument]
    replicatorDispatchRate: dict[str, Any]
    clusterSubscribeRate: dict[str, Any]
    publishMaxMessageRate: dict[str, Any]
    latency_stats_sample_rate: dict[str, Any]
    deleted: bool
    encryption_required: bool
    subscription_auth_mode: str
    properties: dict[str, str]
    tenant_admin_roles: list[str]
