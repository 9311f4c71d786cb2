"""Routes of the publish and subscribe rates at namespace and topic level.

Paths and bodies are Pulsar's: ``namespaces/{t}/{ns}/publishRate`` and ``.../subscribeRate``,
``persistent/{t}/{ns}/{topic}/publishRate`` and ``.../subscribeRate``; a ``PublishRate`` or
``SubscribeRate`` object in, the stored object (or ``null``) out.  Values live as flow-policy
rows (``api.flow.service``), so a write is audited (``namespace.publishRate``, ...), reaches the
workers as a change event and is answered once every live worker enforces it; ``dryRun=true``
answers 200 with the flow limits every affected topic would get.  Topic GETs take
``applied=true`` (for the publish rate a Sluice extension) to resolve through the levels.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Depends
from starlette.responses import Response

from api.deps import UowDep
from api.flow import service
from api.flow.router import (
    APPLIED,
    DRY_RUN,
    DRY_RUN_ANSWER,
    NS,
    RAW_BODY,
    TOPIC,
    namespace_dep,
    topic_dep,
    write_flow_answer,
)
from api.policy_store.target import PolicyTarget
from api.rates.schemas import PublishRateDocument, SubscribeRateDocument
from api.responses import JsonResponse
from api.routing import SluiceRoute
from models.client_rates import (
    PUBLISH_RATE,
    SUBSCRIBE_RATE,
    PublishRateLimit,
    SubscribeRateLimit,
)
from models.errors import InvalidInput
from models.flow_resolution import FlowLimits

router = APIRouter(tags=["publish and subscribe rates"], route_class=SluiceRoute)

# kind -> (parse a body, the resolved value of a topic, response document)
KINDS: dict[str, tuple[Callable[[object], Any], Callable[[FlowLimits], Any], type]] = {
    PUBLISH_RATE: (
        PublishRateLimit.from_json,
        lambda limits: limits.rates.publish_rate.value,
        PublishRateDocument,
    ),
    SUBSCRIBE_RATE: (
        SubscribeRateLimit.from_json,
        lambda limits: limits.rates.subscribe_rate.value,
        SubscribeRateDocument,
    ),
}


def _add_routes(path: str, kind: str, level: str, target_dep) -> None:
    target_param = Depends(target_dep)
    parse, applied_value, document = KINDS[kind]

    async def get_rate(
        uow: UowDep, target: PolicyTarget = target_param, applied: bool = APPLIED
    ) -> Response:
        if applied and target.topic is not None:
            limits = await service.applied_limits(uow, target)
            return JsonResponse(applied_value(limits).to_json())
        return JsonResponse(await service.read_value(uow, target, kind))

    async def set_rate(
        uow: UowDep,
        target: PolicyTarget = target_param,
        body: Any = RAW_BODY,
        dry_run: bool = DRY_RUN,
    ) -> Response:
        if body is None:
            raise InvalidInput("Request body is required")
        await service.set_value(uow, target, kind, parse(body))
        return await write_flow_answer(uow, target)

    async def remove_rate(
        uow: UowDep, target: PolicyTarget = target_param, dry_run: bool = DRY_RUN
    ) -> Response:
        await service.remove_value(uow, target, kind)
        return await write_flow_answer(uow, target)

    # The body is parsed by the value object (strict: Pulsar's fields only); the schema that
    # documents it is the response document's.
    body_doc = {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {
                    "schema": {"$ref": f"#/components/schemas/{document.__name__}"}
                }
            },
        }
    }
    for method, handler, status, extra in (
        ("GET", get_rate, 200, {"response_model": document | None}),
        ("POST", set_rate, 204, {"responses": DRY_RUN_ANSWER, "openapi_extra": body_doc}),
        ("DELETE", remove_rate, 204, {"responses": DRY_RUN_ANSWER}),
    ):
        verb = {"GET": "get", "POST": "set", "DELETE": "remove"}[method]
        router.add_api_route(
            path,
            handler,
            methods=[method],
            name=f"{verb}_{level}_{kind}",
            status_code=status,
            summary=f"{verb.title()} the {level} {kind}",
            **extra,
        )


for _kind in (PUBLISH_RATE, SUBSCRIBE_RATE):
    _add_routes(f"{NS}/{_kind}", _kind, "namespace", namespace_dep)
    _add_routes(f"{TOPIC}/{_kind}", _kind, "topic", topic_dep)
