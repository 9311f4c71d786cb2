"""Database errors answer 503 with a reason: the server refused or lost the connection, or
every pooled connection stayed busy past the pool's timeout."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from api.errors import install_error_handlers


@pytest.mark.parametrize(
    "error",
    [
        OperationalError("SELECT 1", {}, ConnectionRefusedError("connection refused")),
        PoolTimeout("QueuePool limit of size 10 overflow 10 reached"),
    ],
    ids=["connection", "pool"],
)
async def test_database_errors_answer_503(error: Exception) -> None:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/fails")
    async def fails() -> None:
        raise error

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        response = await client.get("/fails")
    assert response.status_code == 503
    assert response.json() == {"reason": "Database unavailable, retry later"}
