"""The flow-control suite (``tests/workers/test_flow_control.py``: backlog quotas, max unacked,
message TTL) on a 3-master Redis Cluster."""

import pytest

from tests.workers.test_flow_control import *  # noqa: F403

pytestmark = pytest.mark.cluster
