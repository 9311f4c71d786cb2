"""The dormancy suite (``tests/workers/test_dormancy.py``) on a 3-master Redis Cluster: quiet
partitions on every shard sleep, wake on every client event, and cost no Redis call."""

import pytest

from tests.workers.test_dormancy import *  # noqa: F403

pytestmark = pytest.mark.cluster
