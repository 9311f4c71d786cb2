"""Database errors answer 503 with a reason: the server refused or lost the connection, or
every pooled connection stayed busy past the pool's timeout."""

from __future__ import annotations

import pytest
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from tests.api.raising import answer_to


@pytest.mark.parametrize(
    "error",
    [
        OperationalError("SELECT 1", {}, ConnectionRefusedError("connection refused")),
        PoolTimeout("QueuePool limit of size 10 overflow 10 reached"),
    ],
    ids=["connection", "pool"],
)
async def test_database_errors_answer_503(error: Exception) -> None:
    response = await answer_to(error)
    assert response.status_code == 503
    assert response.json() == {"reason": "Database unavailable, retry later"}
