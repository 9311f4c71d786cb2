"""The strict-bound throttling suite (``tests/workers/test_strict_bound.py``) on a 3-master
Redis Cluster: every limit holds from the first message, per partition, on every shard."""

import pytest

from tests.workers.test_strict_bound import *  # noqa: F403

pytestmark = pytest.mark.cluster
