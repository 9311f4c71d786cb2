"""Tenant, namespace and topic names as ``pulsar-admin`` accepts them, turned into URL paths.

A topic is ``persistent://tenant/ns/topic``, ``tenant/ns/topic`` or a bare ``topic`` (which,
as in Pulsar, means ``public/default/topic``).  Sluice has persistent topics only.
"""

from __future__ import annotations

from sluice.admin_cli.client import AdminError, segment

DEFAULT_TENANT = "public"
DEFAULT_NAMESPACE = "default"


def namespace_path(name: str) -> str:
    """``tenant/namespace`` as the escaped path ``tenant/namespace``."""
    parts = name.split("/")
    if len(parts) != 2 or not all(parts):
        raise AdminError(f"invalid namespace name '{name}': expected <tenant>/<namespace>")
    return "/".join(segment(p) for p in parts)


def topic_parts(name: str) -> tuple[str, str, str]:
    """(tenant, namespace, local name) of a topic given in any accepted spelling."""
    text = name
    if "://" in text:
        domain, text = text.split("://", 1)
        if domain == "non-persistent":
            raise AdminError(f"non-persistent topics are not supported by Sluice: '{name}'")
        if domain != "persistent":
            raise AdminError(f"invalid topic domain '{domain}' in '{name}'")
    parts = text.split("/")
    if len(parts) == 1 and parts[0] and "://" not in name:
        return DEFAULT_TENANT, DEFAULT_NAMESPACE, parts[0]
    if len(parts) != 3 or not all(parts):
        raise AdminError(
            f"invalid topic name '{name}': expected persistent://<tenant>/<namespace>/<topic>"
        )
    return parts[0], parts[1], parts[2]


def topic_path(name: str) -> str:
    """The path ``/admin/v2/persistent/t/ns/topic`` of a topic."""
    return "/admin/v2/persistent/" + "/".join(segment(p) for p in topic_parts(name))
