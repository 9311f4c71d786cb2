"""Fast JSON responses (orjson) and the empty 204 that Pulsar answers to writes."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import JSONResponse, Response


class JsonResponse(JSONResponse):
    """JSON rendered with orjson; non-string keys and datetimes handled."""

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, option=orjson.OPT_NON_STR_KEYS)


def no_content() -> Response:
    """204, the answer to every successful write."""
    return Response(status_code=204)
