"""The app tries its routers in order; a router none of whose routes matches a path says so
with one pattern instead of going through each of its routes (``api.routing.SluiceRouter``),
and which route answers a path is unchanged."""

from __future__ import annotations

from fastapi.routing import APIRoute

from api.app import ROUTERS, create_app
from api.routing import SluiceRouter
from models.settings import Settings
from tests.api.orders import TOPIC, create_topic


def test_a_topic_request_tries_no_route_of_other_paths(http, monkeypatch) -> None:
    create_topic(http)
    tried: list[str] = []
    matches = APIRoute.matches

    def counted(route: APIRoute, scope):
        tried.append(route.path)
        return matches(route, scope)

    monkeypatch.setattr(APIRoute, "matches", counted)
    assert http.get(f"{TOPIC}/partitions").json() == {"partitions": 2}
    assert tried, "the request was routed"
    assert all(path.startswith("/admin/v2/persistent/") for path in tried), tried


def test_a_router_skips_exactly_the_paths_none_of_its_routes_matches() -> None:
    """For a path made from each route of the app (and a few no route knows): a router's one
    pattern matches it when, and only when, one of the router's routes does."""
    create_app(Settings())  # includes the routers
    paths = {"/admin/v2/unknown", "/console/x", "/admin/v2/persistent/a/b"}
    for router in ROUTERS:
        for route in router.routes:
            paths.add(route.path.replace("{", "x").replace("}", "").replace(":path", ""))
    for router in ROUTERS:
        assert isinstance(router, SluiceRouter)
        pattern = router._any_route_pattern()
        assert pattern is not None
        for path in paths:
            matched = any(route.path_regex.match(path) for route in router.routes)
            assert bool(pattern.match(path)) == matched, (router.routes[0].path, path)
