"""Every route declares what it answers, so ``/openapi.json`` describes the responses."""

from __future__ import annotations

import typing

import httpx
from fastapi.routing import APIRoute
from pydantic import TypeAdapter
from starlette.responses import (
    HTMLResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)

from api.app import create_app
from api.limits.schemas import RateDryRun

ADMIN = "/admin/v2"
UNTYPED = (dict, list, typing.Any, dict[str, typing.Any], list[dict])
NON_JSON = (HTMLResponse, PlainTextResponse, RedirectResponse, StreamingResponse)


def api_routes(routes) -> list[APIRoute]:
    """Every API route, also those of included routers (kept apart by FastAPI)."""
    found: list[APIRoute] = []
    for route in routes:
        if isinstance(route, APIRoute):
            found.append(route)
        elif hasattr(route, "original_router"):
            found.extend(api_routes(route.original_router.routes))
    return found


def _exempt(route: APIRoute) -> bool:
    """204 answers, redirects, streams, pages and non-JSON bodies declare no model."""
    response_class = getattr(route.response_class, "value", route.response_class)
    if route.status_code == 204 or not route.include_in_schema:
        return True
    if isinstance(response_class, type) and issubclass(response_class, NON_JSON):
        return True
    # A plain Response with the media types it answers declared (charts).
    return response_class is Response and bool(route.responses.get(200, {}).get("content"))


def test_every_api_route_declares_a_response_model(settings):
    app = create_app(settings)
    routes = api_routes(app.routes)
    assert len(routes) > 40
    missing, untyped, bodies_on_204 = [], [], []
    for route in routes:
        label = f"{sorted(route.methods)} {route.path}"
        if route.status_code == 204 and route.response_model is not None:
            bodies_on_204.append(label)
        if _exempt(route):
            continue
        if route.response_model is None:
            missing.append(label)
        elif route.response_model in UNTYPED:
            untyped.append(label)
    assert not missing, f"routes without a response model: {missing}"
    assert not untyped, f"routes answering an untyped dict or list: {untyped}"
    assert not bodies_on_204, f"204 routes with a body model: {bodies_on_204}"


def test_openapi_documents_a_schema_for_every_json_answer(http: httpx.Client):
    schema = http.get("/openapi.json").json()
    empty = []
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            for status, response in operation["responses"].items():
                if not status.startswith("2") or status == "204":
                    continue
                content = response.get("content", {})
                json_schema = content.get("application/json", {}).get("schema")
                if "application/json" in content and not json_schema:
                    empty.append(f"{method.upper()} {path} {status}")
    assert not empty, f"JSON answers without a schema: {empty}"


def _model_of(settings, path: str, method: str = "GET"):
    app = create_app(settings)
    for route in api_routes(app.routes):
        if route.path == path and method in route.methods:
            return route.response_model
    raise AssertionError(f"no route {method} {path}")


def test_passed_through_answers_match_their_declared_models(http: httpx.Client, settings):
    """Routes answering a prepared ``JsonResponse`` skip FastAPI's check: check them here."""
    http.put(f"{ADMIN}/tenants/acme", json={"allowedClusters": ["standalone"]})
    http.put(f"{ADMIN}/namespaces/acme/orders")
    http.put(f"{ADMIN}/persistent/acme/orders/t", json={})
    rate = {"dispatchThrottlingRateInMsg": 10, "dispatchThrottlingRateInByte": -1}
    assert http.post(f"{ADMIN}/persistent/acme/orders/t/dispatchRate", json=rate).is_success
    topic = "/admin/v2/persistent/{tenant}/{namespace}/{topic}"
    for url, path in (
        (f"{ADMIN}/persistent/acme/orders/t/dispatchRate", topic + "/dispatchRate"),
        (
            f"{ADMIN}/persistent/acme/orders/t/subscriptionDispatchRate",
            topic + "/subscriptionDispatchRate",
        ),
        (f"{ADMIN}/persistent/acme/orders/t/messageTTL", topic + "/messageTTL"),
        (f"{ADMIN}/persistent/acme/orders/t/stats", topic + "/stats"),
    ):
        answer = http.get(url)
        assert answer.status_code == 200, (url, answer.text)
        TypeAdapter(_model_of(settings, path)).validate_python(answer.json())
    dry_run = http.post(
        f"{ADMIN}/persistent/acme/orders/t/dispatchRate", params={"dryRun": "true"}, json=rate
    )
    assert dry_run.status_code == 200
    RateDryRun.model_validate(dry_run.json())
