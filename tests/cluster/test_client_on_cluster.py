"""The client suite (``tests/workers/test_client.py``) on a 3-master Redis Cluster."""

import pytest

from tests.workers.test_client import *  # noqa: F403

pytestmark = pytest.mark.cluster
