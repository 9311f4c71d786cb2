"""Request bodies and shared response documents, with Pulsar's JSON field names.

Request bodies are validated strictly: exact JSON types, and only the fields their type has (an
unknown field is refused with 400 naming it; Pulsar would drop it).  Response documents declare
every field in the order the API writes it and forbid any other, so a route that drifts from its
declared shape fails loudly instead of answering something its OpenAPI schema does not describe.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from models.json_body import INT32_MAX, check_fields


class StrictBody(BaseModel):
    """Strict types, and only the declared fields: an unknown one (a typo included) is refused
    with 400 naming it, rather than dropped while the rest of the body applies."""

    model_config = ConfigDict(strict=True, extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _declared_fields_only(cls, data: Any) -> Any:
        check_fields(data, cls.known_fields(), cls.__name__, listed=cls.listed_fields())
        return cls.drop_accepted(data)

    @classmethod
    def known_fields(cls) -> tuple[str, ...]:
        """The field names a client may send."""
        return tuple(cls.model_fields)

    @classmethod
    def listed_fields(cls) -> str | None:
        """How a refusal lists the known fields (all of them by default)."""
        return None

    @classmethod
    def drop_accepted(cls, data: Any) -> Any:
        """Remove known fields the model does not keep (none by default)."""
        return data


class TenantInfo(StrictBody):
    """Pulsar's ``TenantInfo``; a missing ``allowedClusters`` means the local cluster."""

    adminRoles: list[str] = Field(default_factory=list)
    allowedClusters: list[str] | None = None


class BundlesData(StrictBody):
    """Pulsar's ``BundlesData``: the bundle count and/or its boundaries."""

    boundaries: list[str] | None = None
    numBundles: int | None = Field(None, ge=1, le=INT32_MAX)


# Pulsar's ``Policies`` sends every one of its fields (pulsar-admin's ``namespaces create
# --clusters`` sends a whole default ``Policies``), across versions.  Sluice takes
# ``replication_clusters`` and ``bundles`` at creation.  The policies it keeps but sets through
# their own endpoints must come empty (a value there would otherwise be dropped unnoticed); the
# rest are Pulsar features Sluice does not have, accepted and ignored.
SET_ELSEWHERE = {
    "backlog_quota_map": "backlogQuota",
    "clusterDispatchRate": "dispatchRate",
    "topicDispatchRate": "dispatchRate",
    "subscriptionDispatchRate": "subscriptionDispatchRate",
    "message_ttl_in_seconds": "messageTTL",
    "max_unacked_messages_per_consumer": "maxUnackedMessagesPerConsumer",
    "max_unacked_messages_per_subscription": "maxUnackedMessagesPerSubscription",
    "delayed_delivery_policies": "delayedDelivery",
}
PULSAR_ONLY_POLICIES = (
    "auth_policies",
    "allowed_clusters",
    "replicatorDispatchRate",
    "clusterSubscribeRate",
    "persistence",
    "deduplicationEnabled",
    "autoTopicCreationOverride",
    "autoSubscriptionCreationOverride",
    "publishMaxMessageRate",
    "latency_stats_sample_rate",
    "subscription_expiration_time_minutes",
    "retention_policies",
    "deleted",
    "encryption_required",
    "inactive_topic_policies",
    "subscription_auth_mode",
    "max_producers_per_topic",
    "max_consumers_per_topic",
    "max_consumers_per_subscription",
    "max_subscriptions_per_topic",
    "compaction_threshold",
    "offload_threshold",
    "offload_threshold_in_seconds",
    "offload_deletion_lag_ms",
    "max_topics_per_namespace",
    "schema_auto_update_compatibility_strategy",
    "schema_compatibility_strategy",
    "is_allow_auto_update_schema",
    "schema_validation_enforced",
    "offload_policies",
    "deduplicationSnapshotIntervalSeconds",
    "subscription_types_enabled",
    "allowed_topic_properties_for_metrics",
    "properties",
    "resource_group_name",
    "replicate_subscriptions_enabled",
    "migrated",
    "dispatcherPauseOnAckStatePersistentEnabled",
    "entryFilters",
    "clusterThatCanDeleteNamespace",
)


class NamespacePolicies(StrictBody):
    """Pulsar's ``Policies`` as sent to create a namespace (see ``SET_ELSEWHERE``)."""

    replication_clusters: list[str] | None = None
    bundles: BundlesData | None = None

    @classmethod
    def known_fields(cls) -> tuple[str, ...]:
        return (*cls.model_fields, *SET_ELSEWHERE, *PULSAR_ONLY_POLICIES)

    @classmethod
    def listed_fields(cls) -> str:
        return ", ".join(cls.model_fields) + " (and the other fields of Pulsar's Policies)"

    @classmethod
    def drop_accepted(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        for name, endpoint in SET_ELSEWHERE.items():
            if data.get(name) not in (None, {}):
                raise PydanticCustomError(
                    "set_elsewhere",
                    "{name} is not taken when creating a namespace: create it, then set it"
                    " with POST {path}",
                    {"name": name, "path": f"/admin/v2/namespaces/<tenant>/<namespace>/{endpoint}"},
                )
        return {k: v for k, v in data.items() if k in cls.model_fields}


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
    delayed_delivery_policies: dict[str, Any] | None  # Pulsar's DelayedDeliveryPolicies
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
