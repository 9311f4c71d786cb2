"""Fixtures of the admin API tests."""

from __future__ import annotations

import pytest

from tests.api.orders import create_topic


@pytest.fixture
def topic(http):
    """``http`` on a server holding ``persistent://acme/orders/created`` (2 partitions)."""
    return create_topic(http)
