"""Names of tenants, namespaces, topics and partitions, validated as Pulsar validates them.

A tenant, namespace, topic or cluster name is non-empty and made of word characters and
``- = : .`` (Pulsar's ``NamedEntity`` rule), and not made of dots only: ``.`` and ``..`` would
name the parent of a path segment in every URL and key that holds the name.  A subscription name
is free text without control characters, and not made of dots only either.  A topic's full name
is ``persistent://tenant/ns/local``; a partition of a partitioned topic is
``local-partition-N``.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from sluice.protocol.errors import PreconditionFailed

_NAME = re.compile(r"^[-=:.\w]+$", re.ASCII)  # Java \w is ASCII-only
MAX_NAME_LENGTH = 255
PARTITION_SUFFIX = "-partition-"
PERSISTENT = "persistent"


def is_valid_name(name: str) -> bool:
    """Pulsar's ``NamedEntity.checkName`` rule, plus a length cap; dots alone are refused."""
    return (
        len(name) <= MAX_NAME_LENGTH and _NAME.fullmatch(name) is not None and not _only_dots(name)
    )


def has_control_character(text: str) -> bool:
    """True when ``text`` holds a control character (C0, DEL or C1)."""
    return not text.isprintable() and any(unicodedata.category(c) == "Cc" for c in text)


def _only_dots(name: str) -> bool:
    return name.strip(".") == ""


def check_tenant(name: str) -> str:
    """Return ``name`` or raise 412 "Tenant name is not valid"."""
    if not is_valid_name(name):
        raise PreconditionFailed("Tenant name is not valid")
    return name


def check_namespace(tenant: str, namespace: str) -> str:
    """Return ``tenant/namespace`` or raise 412 "Namespace name is not valid"."""
    if not is_valid_name(tenant) or not is_valid_name(namespace):
        raise PreconditionFailed("Namespace name is not valid")
    return f"{tenant}/{namespace}"


def check_cluster(name: str) -> str:
    """Return ``name`` or raise 412 "Cluster name is not valid"."""
    if not is_valid_name(name):
        raise PreconditionFailed("Cluster name is not valid")
    return name


def check_subscription(name: str) -> str:
    """Subscription names are free text in Pulsar; refuse empty, dots only and control
    characters."""
    if not name or len(name) > MAX_NAME_LENGTH or _only_dots(name) or has_control_character(name):
        raise PreconditionFailed("Subscription name is not valid")
    return name


@dataclass(frozen=True, slots=True)
class TopicName:
    """A persistent topic (or one partition of it)."""

    tenant: str
    namespace: str
    local: str

    @classmethod
    def parse(cls, tenant: str, namespace: str, local: str) -> TopicName:
        """Validate the three path segments of a topic; raise 412 when invalid."""
        if not is_valid_name(tenant) or not is_valid_name(namespace):
            raise PreconditionFailed("Namespace name is not valid")
        if not is_valid_name(local):
            raise PreconditionFailed(f"Invalid topic name {local}")
        return cls(tenant, namespace, local)

    @classmethod
    def from_full(cls, full: str) -> TopicName:
        """Parse ``persistent://t/ns/topic`` (or the short ``t/ns/topic``)."""
        text = full
        if "://" in text:
            domain, text = text.split("://", 1)
            if domain != PERSISTENT:
                raise PreconditionFailed(f"Only persistent topics are supported: {full}")
        parts = text.split("/")
        if len(parts) != 3:
            raise PreconditionFailed(f"Invalid topic name {full}")
        return cls.parse(*parts)

    @property
    def namespace_name(self) -> str:
        """``tenant/namespace``."""
        return f"{self.tenant}/{self.namespace}"

    @property
    def full(self) -> str:
        """``persistent://tenant/namespace/local``."""
        return f"{PERSISTENT}://{self.tenant}/{self.namespace}/{self.local}"

    @property
    def partition_index(self) -> int:
        """The partition number if this names a partition, else -1."""
        base, sep, index = self.local.rpartition(PARTITION_SUFFIX)
        if sep and base and index.isdigit():
            return int(index)
        return -1

    @property
    def base(self) -> TopicName:
        """The partitioned (base) topic this partition belongs to, or itself."""
        if self.partition_index < 0:
            return self
        return TopicName(self.tenant, self.namespace, self.local.rpartition(PARTITION_SUFFIX)[0])

    def partition(self, index: int) -> TopicName:
        """The name of partition ``index`` of this topic."""
        return TopicName(self.tenant, self.namespace, f"{self.local}{PARTITION_SUFFIX}{index}")

    def __str__(self) -> str:
        return self.full


def check_resource_group(name: str) -> str:
    """Return ``name`` or raise 412 "ResourceGroup name is not valid"."""
    if not is_valid_name(name):
        raise PreconditionFailed("ResourceGroup name is not valid")
    return name
