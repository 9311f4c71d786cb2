"""Redis errors that mean "Redis cannot serve now" answer 503 with a reason, the cluster
client's slot-table holes included (raised outside ``RedisError``); a mistake in a call stays
a 500."""

from __future__ import annotations

import pytest
from redis import exceptions as redis_errors

from tests.api.raising import answer_to


@pytest.mark.parametrize(
    "error",
    [
        redis_errors.ConnectionError("Connection refused"),
        redis_errors.ClusterDownError("CLUSTERDOWN Hash slot not served"),
        redis_errors.SlotNotCoveredError('Slot "5" is not covered by the cluster.'),
        redis_errors.RedisClusterException(
            "All slots are not covered after query all startup_nodes. 16383 of 16384 covered..."
        ),
        redis_errors.ResponseError("LOADING Redis is loading the dataset in memory"),
    ],
    ids=["connection", "cluster-down", "slot-not-covered", "slots-not-covered", "loading"],
)
async def test_redis_unavailable_answers_503(error: Exception) -> None:
    response = await answer_to(error)
    assert response.status_code == 503
    assert response.json() == {"reason": "Redis unavailable, retry later"}


@pytest.mark.parametrize(
    "error",
    [
        redis_errors.ResponseError("WRONGTYPE Operation against a key holding the wrong kind"),
        redis_errors.RedisClusterException("No targets were found to execute ('PING',) command on"),
    ],
    ids=["wrongtype", "no-targets"],
)
async def test_a_mistake_in_a_call_answers_500(error: Exception) -> None:
    response = await answer_to(error)
    assert response.status_code == 500
    assert response.json() == {"reason": "Internal server error"}
