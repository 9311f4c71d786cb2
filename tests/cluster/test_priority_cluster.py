"""The message-priority suite (``tests/workers/test_priority.py``: order across levels and
within one under a limit, delayed and redelivered messages, Key_Shared, the starvation guard,
lowest-priority eviction, stats per level, dead letters) on a 3-master Redis Cluster."""

import pytest

from tests.workers.test_priority import *  # noqa: F403

pytestmark = pytest.mark.cluster
