"""The API reference pages, ``/docs`` (Swagger UI) and ``/redoc`` (ReDoc), that work offline.

FastAPI's own pages load their scripts and styles from a CDN and show nothing on a host
without Internet access; these are the same pages with the assets served by the admin service
itself, from the ``fastapi-offline`` package, under ``/docs/assets``.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import FastAPI, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.staticfiles import StaticFiles
from starlette.responses import HTMLResponse

DOCS_URL = "/docs"
OAUTH2_REDIRECT_URL = "/docs/oauth2-redirect"
REDOC_URL = "/redoc"
ASSETS_URL = "/docs/assets"
ASSETS = ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js", "favicon.png")
# Open to anyone, like the pages themselves (see api.auth).
ASSET_PATHS = tuple(f"{ASSETS_URL}/{name}" for name in ASSETS)


def install_docs(app: FastAPI) -> None:
    """Serve the pages and their assets; the app must be built with ``docs_url=None`` and
    ``redoc_url=None``."""
    static = files("fastapi_offline") / "static"
    app.mount(ASSETS_URL, StaticFiles(directory=str(static)), name="docs-assets")

    def asset(request: Request, name: str) -> str:
        return f"{request.scope.get('root_path', '')}{ASSETS_URL}/{name}"

    @app.get(DOCS_URL, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=f"{request.scope.get('root_path', '')}{app.openapi_url}",
            title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=OAUTH2_REDIRECT_URL,
            swagger_js_url=asset(request, "swagger-ui-bundle.js"),
            swagger_css_url=asset(request, "swagger-ui.css"),
            swagger_favicon_url=asset(request, "favicon.png"),
            swagger_ui_parameters=app.swagger_ui_parameters,
        )

    @app.get(OAUTH2_REDIRECT_URL, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get(REDOC_URL, include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        return get_redoc_html(
            openapi_url=f"{request.scope.get('root_path', '')}{app.openapi_url}",
            title=f"{app.title} - ReDoc",
            redoc_js_url=asset(request, "redoc.standalone.js"),
            redoc_favicon_url=asset(request, "favicon.png"),
            with_google_fonts=False,
        )
