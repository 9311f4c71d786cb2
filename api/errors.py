"""Mapping of every error to Pulsar's ``{"reason": ...}`` shape, in one place.

Domain errors map by class; request validation errors become 400; database outages 503 (the
server refused or lost the connection, or no pooled connection came free in time), and
so does a Redis that cannot serve (refused or lost connection, timeout, still loading its data,
read-only replica, out of memory, cluster down); anything unexpected, including a Redis error
that is a bug (a wrong type, a script error), 500 without a stack trace (it is logged instead).
"""

from __future__ import annotations

import enum
import functools
import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from redis import exceptions as redis_errors
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from api.responses import JsonResponse
from models import errors
from models.json_body import shown

log = logging.getLogger(__name__)

# A refusal names this many problems, then counts the rest: a body of 40,000 unknown keys gets
# a short reason, not one of megabytes that takes as long to send as to build.
REASONS_LISTED = 20

STATUS: dict[type[errors.SluiceError], int] = {
    errors.InvalidInput: 400,
    errors.Unauthorized: 401,
    errors.Forbidden: 403,
    errors.NotFound: 404,
    errors.NotAllowed: 405,
    errors.NotAcceptable: 406,
    errors.Conflict: 409,
    errors.PreconditionFailed: 412,
    errors.PayloadTooLarge: 413,
    errors.Unavailable: 503,
}


def reason_response(status: int, reason: str) -> JsonResponse:
    """A response with Pulsar's error body."""
    return JsonResponse({"reason": reason}, status_code=status)


def status_of(exc: errors.SluiceError) -> int:
    """HTTP status for a domain error (the nearest mapped base class)."""
    for cls in type(exc).__mro__:
        if cls in STATUS:
            return STATUS[cls]
    return 500


async def _domain(_request: Request, exc: Exception) -> JsonResponse:
    assert isinstance(exc, errors.SluiceError)
    return reason_response(status_of(exc), exc.reason)


@functools.cache
def _enum_values(class_name: str) -> tuple[str, ...] | None:
    """The values of the enum named ``class_name`` (a strict field's ``is_instance_of``
    error names only the class), or None when no enum has that name."""
    pending = list(enum.Enum.__subclasses__())
    while pending:
        cls = pending.pop()
        if cls.__name__ == class_name and len(cls):
            return tuple(str(member.value) for member in cls)
        pending.extend(cls.__subclasses__())
    return None


def _message(error: dict) -> str:
    """Pydantic's message, except that an unknown enum value names the allowed ones."""
    if error.get("type") == "is_instance_of":
        allowed = _enum_values(str(error.get("ctx", {}).get("class", "")))
        if allowed:
            return f"{shown(error.get('input'))} is not one of {', '.join(allowed)}"
    return error.get("msg", "invalid")


async def _validation(request: Request, exc: Exception) -> JsonResponse:
    assert isinstance(exc, RequestValidationError)
    content_type = request.headers.get("content-type", "")
    body_error = any(e.get("loc", ("",))[0] == "body" for e in exc.errors())
    if body_error and content_type and "json" not in content_type:
        return reason_response(
            415, f"Unsupported media type {content_type}: send Content-Type: application/json"
        )
    parts = []
    problems = exc.errors()
    for error in problems:
        loc = [str(p) for p in error.get("loc", ())]
        where = ".".join(loc[1:] if len(loc) > 1 else loc) or "request"
        if loc and loc[0] == "body" and error.get("type") == "json_invalid":
            return reason_response(400, "Malformed JSON body")
        if loc[:1] == ["body"] and error.get("type") == "missing" and len(loc) == 1:
            return reason_response(400, "Request body is required")
        if len(parts) < REASONS_LISTED:
            parts.append(f"{where}: {_message(error)}")
    if len(problems) > len(parts):
        parts.append(f"and {len(problems) - len(parts)} more")
    return reason_response(400, "Invalid request: " + "; ".join(parts))


async def _http(_request: Request, exc: Exception) -> JsonResponse:
    assert isinstance(exc, StarletteHTTPException)
    detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    response = reason_response(exc.status_code, detail)
    for name, value in (exc.headers or {}).items():
        response.headers[name] = value
    return response


async def _integrity(_request: Request, exc: Exception) -> JsonResponse:
    log.info("integrity error mapped to 409: %s", exc)
    return reason_response(409, "Concurrent modification")


async def _database(_request: Request, exc: Exception) -> JsonResponse:
    log.warning("database error mapped to 503: %s", exc)
    return reason_response(503, "Database unavailable, retry later")


# Redis errors that mean "Redis cannot serve right now" rather than a mistake in the request
# or the code; and the reply prefixes with that meaning redis-py has no class for.
REDIS_UNAVAILABLE: tuple[type[Exception], ...] = (
    redis_errors.ConnectionError,  # refused, reset, auth, still loading, pool exhausted
    redis_errors.TimeoutError,
    redis_errors.ReadOnlyError,  # a replica after a failover
    redis_errors.OutOfMemoryError,
    redis_errors.ClusterDownError,
    redis_errors.TryAgainError,
    redis_errors.SlotNotCoveredError,  # a slot no master serves yet (outside RedisError)
)
REDIS_UNAVAILABLE_REPLIES = ("MISCONF", "MASTERDOWN", "LOADING")
# The cluster client's words when its slot table has a hole (a plain RedisClusterException).
CLUSTER_UNCOVERED = "All slots are not covered"


def redis_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says Redis is unavailable (503) rather than a bug (500)."""
    if isinstance(exc, REDIS_UNAVAILABLE):
        return True
    if isinstance(exc, redis_errors.RedisClusterException):
        return str(exc).startswith(CLUSTER_UNCOVERED)
    return isinstance(exc, redis_errors.ResponseError) and str(exc).startswith(
        REDIS_UNAVAILABLE_REPLIES
    )


async def _redis(request: Request, exc: Exception) -> JsonResponse:
    if not redis_unavailable(exc):
        return await _unexpected(request, exc)
    log.warning("Redis error mapped to 503: %s: %s", type(exc).__name__, exc)
    return reason_response(503, "Redis unavailable, retry later")


async def _unexpected(_request: Request, exc: Exception) -> JsonResponse:
    log.exception("unhandled error", exc_info=exc)
    return reason_response(500, "Internal server error")


def install_error_handlers(app: FastAPI) -> None:
    """Register every handler on ``app``."""
    app.add_exception_handler(errors.SluiceError, _domain)
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(StarletteHTTPException, _http)
    app.add_exception_handler(IntegrityError, _integrity)
    app.add_exception_handler(OperationalError, _database)
    app.add_exception_handler(DBAPIError, _database)
    # Every pooled connection busy for the pool's whole timeout: the database is too slow.
    app.add_exception_handler(PoolTimeout, _database)
    app.add_exception_handler(redis_errors.RedisError, _redis)
    app.add_exception_handler(redis_errors.RedisClusterException, _redis)
    app.add_exception_handler(Exception, _unexpected)
