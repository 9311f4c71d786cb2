"""Every ORM table in one import, so ``Base.metadata`` is complete wherever it is used."""

from models.base import Base
from models.journal import AuditEntry, OutboxEvent
from models.policies import (
    DISPATCH_RATE,
    SUBSCRIPTION_DISPATCH_RATE,
    BrokerConfigOverride,
    DispatchRatePolicy,
    FlowPolicy,
    PermissionGrant,
    SubscriptionPermission,
)
from models.reports import BacklogReportRow, RateReportRow, ReportRun
from models.resource_groups import ResourceGroup, ResourceGroupAttachment
from models.tenancy import Cluster, Namespace, Subscription, Tenant, Topic

__all__ = [
    "DISPATCH_RATE",
    "SUBSCRIPTION_DISPATCH_RATE",
    "AuditEntry",
    "BacklogReportRow",
    "Base",
    "BrokerConfigOverride",
    "Cluster",
    "DispatchRatePolicy",
    "FlowPolicy",
    "Namespace",
    "OutboxEvent",
    "PermissionGrant",
    "RateReportRow",
    "ReportRun",
    "ResourceGroup",
    "ResourceGroupAttachment",
    "Subscription",
    "SubscriptionPermission",
    "Tenant",
    "Topic",
]
