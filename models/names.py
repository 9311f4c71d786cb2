"""Compatibility shim: the module moved to ``sluice.protocol.names`` (the wire protocol the client
and the server share).  Import from there; this name stays until every caller has moved.
"""

from sluice.protocol.names import (
    MAX_NAME_LENGTH,
    PARTITION_SUFFIX,
    PERSISTENT,
    TopicName,
    check_namespace,
    check_subscription,
    check_tenant,
    is_valid_name,
)

__all__ = [
    "MAX_NAME_LENGTH",
    "PARTITION_SUFFIX",
    "PERSISTENT",
    "TopicName",
    "check_namespace",
    "check_subscription",
    "check_tenant",
    "is_valid_name",
]
