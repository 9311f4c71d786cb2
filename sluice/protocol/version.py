"""The data-plane protocol's version, which every component of a deployment checks.

``PROTOCOL`` is the version this release speaks: the Redis key layout, the scripts and their
frames (``sluice.protocol``).  ``OLDEST_PEER`` is the oldest version this release still works
beside: a release that changes the protocol compatibly raises ``PROTOCOL`` only, one that
drops what older releases rely on raises ``OLDEST_PEER`` too.

Every worker and admin service announces both at start (``protocol_announce.lua``: one atomic
step on ``sl:{meta}:config``, the hash clients may read): the deployment keeps the highest of
each, ``protocolNewest`` and ``protocolOldest``.  A component whose ``PROTOCOL`` is below
``protocolOldest`` is too old for the deployment: it refuses to start, a running worker stops
(``workers.protocol_watch``) and a client refuses to make producers and consumers, each
saying which versions it found, instead of half-working beside a newer release.  A rollback
to a release older than ``protocolOldest`` first removes the two fields (docs/deploy.md).
"""

from __future__ import annotations

from sluice.protocol.errors import PreconditionFailed

PROTOCOL = 1
OLDEST_PEER = 1

OLDEST_FIELD = "protocolOldest"
NEWEST_FIELD = "protocolNewest"


class ProtocolMismatch(PreconditionFailed):
    """This component is older than the oldest protocol the deployment accepts."""


def mismatch(component: str, oldest: int, newest: int) -> ProtocolMismatch:
    """The error a ``component`` (e.g. "this worker") too old for the deployment reports."""
    return ProtocolMismatch(
        f"{component} speaks data-plane protocol {PROTOCOL}, but this deployment requires "
        f"protocol {oldest} or newer (a release speaking protocol {newest} runs in it): "
        f"upgrade {component.removeprefix('this ')} to the deployment's release"
    )


def check(component: str, oldest: object, newest: object) -> None:
    """Raise ``ProtocolMismatch`` when the deployment's ``protocolOldest`` (as read from
    Redis: bytes, str or None) is above ``PROTOCOL``."""
    required = _number(oldest)
    if required > PROTOCOL:
        raise mismatch(component, required, max(_number(newest), required))


def _number(raw: object) -> int:
    if raw is None:
        return 0
    try:
        return int(raw.decode() if isinstance(raw, bytes) else str(raw))
    except ValueError:
        return 0
