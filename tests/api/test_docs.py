"""/docs and /redoc load everything from the admin service itself: they work offline."""

from __future__ import annotations

import re

import httpx
import pytest

from api.docs import ASSET_PATHS

EXTERNAL = re.compile(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", re.IGNORECASE)
LOCAL_REFERENCE = re.compile(r"""(?:src|href|url)\s*[=:]\s*['"](/[^'"]*)['"]""")


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_pages_reference_only_local_assets(http: httpx.Client, page: str):
    answer = http.get(page)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/html")
    html = answer.text
    assert not EXTERNAL.search(html), "the page loads something from another host"
    assert "cdn" not in html.lower() and "fonts.googleapis" not in html
    references = set(LOCAL_REFERENCE.findall(html))
    assert "/openapi.json" in references
    assets = references - {"/openapi.json"}
    assert assets and assets <= set(ASSET_PATHS)
    for path in assets:
        loaded = http.get(path)
        assert loaded.status_code == 200, path
        assert len(loaded.content) > 1000, path


def test_every_asset_is_served_with_its_type(http: httpx.Client):
    types = {".js": "javascript", ".css": "text/css", ".png": "image/png"}
    for path in ASSET_PATHS:
        answer = http.get(path)
        assert answer.status_code == 200, path
        suffix = path[path.rindex(".") :]
        assert types[suffix] in answer.headers["content-type"], path


def test_oauth2_redirect_page(http: httpx.Client):
    answer = http.get("/docs/oauth2-redirect")
    assert answer.status_code == 200
    assert not EXTERNAL.search(answer.text)


def test_docs_are_not_in_the_openapi_document(http: httpx.Client):
    paths = http.get("/openapi.json").json()["paths"]
    assert not [p for p in paths if p.startswith(("/docs", "/redoc"))]
