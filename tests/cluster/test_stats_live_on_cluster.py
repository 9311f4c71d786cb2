"""The live stats suite (``tests/workers/test_stats_live.py``) on a 3-master Redis Cluster:
each partition's atomic reading of counters and backlog names keys of its own slot only."""

import pytest

from tests.workers.test_stats_live import *  # noqa: F403

pytestmark = pytest.mark.cluster
