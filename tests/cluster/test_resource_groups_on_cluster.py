"""Resource groups on a 3-master Redis Cluster: the group's budget lives in the group's own
slot, so the group-wide strict bound, the fair split and the publish limit hold across
partitions on every shard (the tests of ``tests/workers/test_resource_groups.py``)."""

import pytest

from tests.workers.test_resource_groups import (  # noqa: F401  (collected here too)
    test_the_group_publish_limit_slows_every_producer_of_the_group,
    test_the_limit_holds_across_two_workers,
    test_two_backlogged_namespaces_share_the_group_half_and_half,
)

pytestmark = pytest.mark.cluster
