"""What a report run asks of the workers (``tests/reports/test_freshness.py``) on a 3-master
Redis Cluster."""

import pytest

from tests.reports.test_freshness import *  # noqa: F403

pytestmark = pytest.mark.cluster
