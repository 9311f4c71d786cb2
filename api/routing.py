"""What every request must pass before a route's code runs, in one place.

Every router of the admin API is built with ``route_class=SluiceRoute``; then, for every route:

* a path parameter with a control character is refused with 412 (Pulsar's status for a bad
  name), a query parameter with one with 400: none is meaningful, and PostgreSQL cannot even
  store a NUL; so are percent-encoded bytes that are not UTF-8 (decoding would silently turn
  them into U+FFFD and, say, create a subscription of another name);
* a request body must be JSON (``Content-Type: application/json``, else 415), and is decoded
  strictly (``decode_json``): no ``NaN``/``Infinity``, no number a 64-bit integer or a double
  cannot hold, nothing nested deeper than ``MAX_DEPTH``, no NUL or unpaired surrogate in a
  string, valid UTF-8 only.  Each refusal is a 400 with a reason;
* a method the path does not take is a 405 whose reason and ``Allow`` header list the methods
  it does take (over every route of that path, not only the first one matched).

``not_found`` answers a path no route knows with 404 and a reason (a trailing slash is never
redirected: ``PUT /admin/v2/tenants/`` is a 404 that names the path without the slash).
"""

from __future__ import annotations

import json
import math
import re
import urllib.parse
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.routing import APIRoute, APIRouter
from starlette._utils import get_route_path
from starlette.exceptions import HTTPException
from starlette.routing import Match
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocketClose

from models.errors import InvalidInput, PreconditionFailed
from models.json_body import shown
from sluice.protocol.names import has_control_character

MAX_DEPTH = 64  # the deepest body the API takes is 4 levels deep
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
SHOWN_PATH_LENGTH = 200

RouteIndex = list[tuple[re.Pattern[str], frozenset[str]]]


class BodyRefused(HTTPException):
    """A body that is not acceptable JSON: 400 with the reason (FastAPI re-raises an
    ``HTTPException`` met while reading the body; anything else would lose the reason)."""

    def __init__(self, reason: str, status: int = 400) -> None:
        super().__init__(status, reason)


def _refuse_constant(name: str) -> Any:
    raise BodyRefused(f"Invalid JSON body: {name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise BodyRefused(f"Invalid JSON body: number {shown(text)} is out of range")
    return value


def _int64(text: str) -> int:
    # No field takes more than a 64-bit integer; a longer literal is not even converted.
    value = int(text) if len(text) <= 20 else None
    if value is None or not INT64_MIN <= value <= INT64_MAX:
        raise BodyRefused(
            f"Invalid JSON body: integer {shown(text)} is out of range (64-bit signed)"
        )
    return value


def _check_text(text: str) -> None:
    if "\x00" in text:
        raise BodyRefused("Invalid JSON body: a string holds a NUL character (\\u0000)")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise BodyRefused(
                "Invalid JSON body: a string holds an unpaired surrogate (\\ud800-\\udfff)"
            ) from None


def decode_json(body: bytes) -> Any:
    """A request body as JSON, strictly (see the module's docstring); ``BodyRefused``
    otherwise, or ``json.JSONDecodeError`` for text that is not JSON at all."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise BodyRefused("Invalid JSON body: not valid UTF-8") from None
    try:
        value = json.loads(
            text, parse_constant=_refuse_constant, parse_float=_finite_float, parse_int=_int64
        )
    except RecursionError:
        raise BodyRefused(f"Invalid JSON body: nested deeper than {MAX_DEPTH} levels") from None
    # Walk the value without recursion: strings must be storable, nesting bounded.
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            _check_text(item)
        elif isinstance(item, dict | list):
            if depth >= MAX_DEPTH:
                raise BodyRefused(f"Invalid JSON body: nested deeper than {MAX_DEPTH} levels")
            if isinstance(item, dict):
                for key, child in item.items():
                    _check_text(key)
                    stack.append((child, depth + 1))
            else:
                stack.extend((child, depth + 1) for child in item)
    return value


class StrictJsonRequest(Request):
    """A request whose JSON body is decoded by ``decode_json``."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = decode_json(await self.body())
        return self._json


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def _utf8(raw: bytes) -> bool:
    try:
        urllib.parse.unquote_to_bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def check_parameters(request: Request) -> None:
    """412 for a path parameter, 400 for a query parameter, holding a control character or
    percent-encoded bytes that are not UTF-8 (decoded, they would silently become U+FFFD)."""
    if not _utf8(request.scope.get("raw_path") or b""):
        raise PreconditionFailed("Invalid path: its percent-encoded bytes are not UTF-8")
    if not _utf8(request.scope.get("query_string") or b""):
        raise InvalidInput("Invalid query string: its percent-encoded bytes are not UTF-8")
    for name, value in request.path_params.items():
        if isinstance(value, str) and has_control_character(value):
            raise PreconditionFailed(
                f"Invalid {name} {shown(value)}: control characters are not allowed"
            )
    for name, value in request.query_params.multi_items():
        if has_control_character(name) or has_control_character(value):
            raise InvalidInput(
                f"Invalid query parameter {shown(name)}: control characters are not allowed"
            )


class SluiceRoute(APIRoute):
    """An ``APIRoute`` that applies the checks of this module before the route's code."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        takes_body = self.body_field is not None

        async def checked(request: Request) -> Response:
            check_parameters(request)
            strict = StrictJsonRequest(request.scope, request.receive)
            if takes_body and await strict.body():
                content_type = strict.headers.get("content-type", "")
                if not _is_json(content_type):
                    shown_type = shown(content_type) if content_type else "none"
                    raise BodyRefused(
                        f"Unsupported media type {shown_type}: send Content-Type: application/json",
                        415,
                    )
            return await handler(strict)

        return checked

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.methods and scope["method"] not in self.methods:
            allowed = allowed_methods(scope, scope["path"]) or sorted(self.methods)
            raise HTTPException(
                405,
                f"Method {scope['method']} is not allowed on {_shown_path(scope)}:"
                f" use {', '.join(allowed)}",
                headers={"Allow": ", ".join(allowed)},
            )
        await super().handle(scope, receive, send)


class SluiceRouter(APIRouter):
    """A router that answers "no match" at once for a path none of its routes' patterns
    matches, tried as one regular expression: the app tries its routers in order, and
    going through each route of the routers before the right one cost more CPU than the
    rest of a simple request's routing.  A router with a match is searched as before, so
    which route answers a path (and a 405 for a method it does not take) is unchanged."""

    _any_route: tuple[re.Pattern[str] | None, int] | None = None

    def _any_route_pattern(self) -> re.Pattern[str] | None:
        """Every route's path pattern in one, or None when one has no pattern (or there
        are none): never skip then."""
        if self._any_route is None or self._any_route[1] != len(self.routes):
            patterns = [getattr(route, "path_regex", None) for route in self.routes]
            combined = None
            if patterns and all(patterns):
                # Group names repeat across routes: one pattern takes none.
                alternatives = dict.fromkeys(_UNNAMED.sub("(?:", p.pattern) for p in patterns if p)
                combined = re.compile("|".join(f"(?:{a})" for a in alternatives))
            self._any_route = (combined, len(self.routes))
        return self._any_route[0]

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] == "http":
            pattern = self._any_route_pattern()
            if pattern is not None and not pattern.match(get_route_path(scope)):
                return Match.NONE, {}
        return super().matches(scope)


_UNNAMED = re.compile(r"\(\?P<\w+>")


def named(endpoint: Callable[..., Any], name: str, doc: str) -> None:
    """Give an endpoint a route factory made its name (the route's operation id) and its
    docstring (the route's description)."""
    endpoint.__name__ = endpoint.__qualname__ = name
    endpoint.__doc__ = doc


def index_routes(app: FastAPI, routers: Iterable[APIRouter]) -> None:
    """Record every route's path pattern and methods on ``app``, for ``allowed_methods``."""
    routes = [*app.router.routes, *(route for router in routers for route in router.routes)]
    app.state.route_index = [
        (route.path_regex, frozenset(route.methods or ()))
        for route in routes
        if isinstance(route, APIRoute)
    ]


def allowed_methods(scope: Scope, path: str) -> list[str]:
    """Every method some route of the app takes on ``path``."""
    index: RouteIndex = getattr(scope["app"].state, "route_index", [])
    methods: set[str] = set()
    for pattern, route_methods in index:
        if pattern.match(path):
            methods |= route_methods
    return sorted(methods)


def _shown_path(scope: Scope) -> str:
    path = scope["path"]
    return path if len(path) <= SHOWN_PATH_LENGTH else path[:SHOWN_PATH_LENGTH] + "..."


async def not_found(scope: Scope, receive: Receive, send: Send) -> None:
    """The app's answer to a path no route matches: 404 with a reason."""
    if scope["type"] != "http":
        await WebSocketClose()(scope, receive, send)
        return
    path = scope["path"]
    reason = f"No such resource: {scope['method']} {_shown_path(scope)}"
    if path.endswith("/") and allowed_methods(scope, path.rstrip("/")):
        reason += " (remove the trailing slash)"
    raise HTTPException(404, reason)
