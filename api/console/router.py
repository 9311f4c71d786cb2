"""Routes of the web console: ``GET /console`` (the page) and one route per asset.

The assets are a fixed list, so no path parameter reaches the file system; each answer forbids
loading anything from another origin (``Content-Security-Policy``) and is revalidated on every
load (``Cache-Control: no-cache``), so an upgraded service never runs yesterday's script.
"""

from __future__ import annotations

from importlib.resources import files

from starlette.responses import Response

from api.routing import SluiceRoute, SluiceRouter

CONSOLE_URL = "/console"
STATIC = files("api.console") / "static"
# name -> media type; the page itself is index.html.
ASSETS = {
    "console.css": "text/css; charset=utf-8",
    "api.js": "text/javascript; charset=utf-8",
    "charts.js": "text/javascript; charset=utf-8",
    "forms.js": "text/javascript; charset=utf-8",
    "grants.js": "text/javascript; charset=utf-8",
    "views.js": "text/javascript; charset=utf-8",
    "advice.js": "text/javascript; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
}
# Open to anyone (see api.auth): the shell holds no data.
# The page answers at /console and /console/ alike (a person types either).
CONSOLE_PATHS = (CONSOLE_URL, f"{CONSOLE_URL}/", *(f"{CONSOLE_URL}/{name}" for name in ASSETS))
HEADERS = {
    "Cache-Control": "no-cache",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
        "form-action 'none'"
    ),
}

router = SluiceRouter(route_class=SluiceRoute, include_in_schema=False)


def _serve(name: str, media_type: str) -> None:
    content = (STATIC / name).read_bytes()

    async def asset() -> Response:
        return Response(content, media_type=media_type, headers=HEADERS)

    paths = CONSOLE_PATHS[:2] if name == "index.html" else (f"{CONSOLE_URL}/{name}",)
    for path in paths:
        router.add_api_route(path, asset, methods=["GET"], name=f"console:{path}")


_serve("index.html", "text/html; charset=utf-8")
for _name, _media_type in ASSETS.items():
    _serve(_name, _media_type)
