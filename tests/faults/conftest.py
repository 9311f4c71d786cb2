"""Fixtures for the fault-injection suite: a fleet of worker processes on an emptied plane.

Every module in ``tests/faults`` marks its tests ``faults``; they run in the default suite.
"""

from __future__ import annotations

import httpx
import pytest

from tests.workers.conftest import ADMIN, fleet  # noqa: F401  (a fixture of this folder too)


@pytest.fixture
def namespace(http: httpx.Client) -> str:
    """Tenant ``acme`` with namespace ``orders``; returns ``acme/orders``."""
    body = {"allowedClusters": ["standalone"]}
    assert http.put(f"{ADMIN}/tenants/acme", json=body).status_code == 204
    assert http.put(f"{ADMIN}/namespaces/acme/orders").status_code == 204
    return "acme/orders"
