"""An app with the admin service's error handlers and one route that raises a given error:
what a client is answered for it."""

from __future__ import annotations

import httpx
from fastapi import FastAPI

from api.errors import install_error_handlers


async def answer_to(error: Exception) -> httpx.Response:
    """The answer to a request whose handler raises ``error``."""
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/fails")
    async def fails() -> None:
        raise error

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        return await client.get("/fails")
