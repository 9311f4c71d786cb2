"""The WebSocket routes: Pulsar's ``/ws/v2/producer``, ``/ws/v2/consumer`` and ``/ws/v2/reader``.

Query parameters are Pulsar's.  A handshake that cannot proceed is refused with an HTTP answer,
as Pulsar's proxy refuses the upgrade: 400 ``Invalid query params: ...``, 409 when the producer
or consumer is busy, 503 for a producer held by its backlog quota, 500 otherwise (401 and 403
come from ``api.auth``, which classifies these routes like every other).  The connections run
on one ``sluice.Client`` per admin process, made on first use from the service's Redis URL.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from fastapi import APIRouter, FastAPI, WebSocket
from starlette.datastructures import QueryParams

from api.auth import authorize_websocket
from api.errors import reason_response
from api.sessions.service import check_subscribe, may_use
from api.state import AppState
from api.websocket import sessions
from api.websocket.frames import FrameError, decode_id
from models.errors import Forbidden
from sluice import Client, ConsumerBusy, ProducerBusy, SubscriptionBusy
from sluice.consumer import ConsumerType, DeadLetterPolicy, InitialPosition
from sluice.errors import (
    InvalidConfiguration,
    NotAllowedError,
    ProducerBlockedQuotaExceededException,
    SluiceException,
)
from sluice.message import MessageId
from sluice.protocol.names import TopicName
from sluice.reader import reader_subscription
from sluice.routing import PartitionsRoutingMode

router = APIRouter(tags=["websocket"])
T = TypeVar("T")

TOPIC = "/persistent/{tenant}/{namespace}/{topic}"
SUBSCRIPTION_TYPES = {t.value: t for t in ConsumerType}  # Pulsar's names: Key_Shared
ROUTING_MODES = {
    "RoundRobinPartition": PartitionsRoutingMode.RoundRobinDistribution,
    "SinglePartition": PartitionsRoutingMode.UseSinglePartition,
}


class BadParams(ValueError):
    """A query parameter Pulsar would refuse (400)."""


async def websocket_client(app: FastAPI) -> Client:
    """The process's ``sluice.Client`` for WebSocket connections, made on first use."""
    state: AppState = app.state.sluice
    shared = state.websocket
    async with shared.lock:
        if shared.client is None:
            url = state.settings.effective_redis_url
            shared.client = await asyncio.to_thread(Client, url)
        return shared.client


async def close_websocket_client(app: FastAPI) -> None:
    """Close the WebSocket connections' client (on shutdown)."""
    shared = app.state.sluice.websocket
    client, shared.client = shared.client, None
    if client is not None:
        await asyncio.to_thread(client.close)


def _int(params: QueryParams, name: str, default: int | None = None) -> int | None:
    raw = params.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise BadParams(f"{name} must be an integer, not {raw!r}") from None


def _bool(params: QueryParams, name: str) -> bool | None:
    raw = params.get(name)
    if raw is None:
        return None
    return raw.lower() == "true"  # Java's Boolean.parseBoolean


def _topic(tenant: str, namespace: str, topic: str) -> str:
    return f"persistent://{tenant}/{namespace}/{topic}"


def _queue_size(params: QueryParams) -> int:
    size = _int(params, "receiverQueueSize", sessions.MAX_QUEUE)
    assert size is not None
    if size < 0:
        raise BadParams("receiverQueueSize must be >= 0")
    return max(min(size, sessions.MAX_QUEUE), 1)


async def _refuse(websocket: WebSocket, status: int, reason: str) -> None:
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(reason_response(status, reason))
    else:
        await websocket.close(code=1008, reason=reason[:120])


async def _allowed(
    websocket: WebSocket, action: str, subscription: str | None = None
) -> contextlib.AbstractContextManager | None:
    """``api.auth``'s policy for this handshake, or a grant of ``action`` (``produce``,
    ``consume``) on the path's topic to the role (``models.permissions``), as Pulsar's
    WebSocket service checks (a consumer's ``subscription`` also against the namespace's
    subscription permissions); refused with 403 (None) otherwise.  Allowed, what to hold the
    connection in: for a grant, its tracking (``api.websocket.grants``: a revoke closes it)."""
    try:
        await authorize_websocket(websocket)
    except Forbidden as exc:
        state = websocket.app.state.sluice
        sessions = state.dataplane_acl
        role = websocket.scope.get("state", {}).get("role")
        params = websocket.path_params
        reason = exc.reason
        if sessions is not None and role is not None:
            topic = TopicName.parse(params["tenant"], params["namespace"], params["topic"])
            grants = (await sessions.grants([role])).get(role, [])
            if may_use(grants, topic, action):
                try:
                    if subscription is not None:
                        async with state.sessions() as session:
                            await check_subscribe(session, grants, topic, role, subscription)
                    return state.websocket.granted.holding(
                        websocket, role, topic, action, subscription
                    )
                except Forbidden as refused:
                    reason = refused.reason
        await _refuse(websocket, 403, reason)
        return None
    return contextlib.nullcontext()


async def _opening(
    websocket: WebSocket,
    action: str,
    read: Callable[[QueryParams], T],
    subscription: str | None = None,
) -> tuple[contextlib.AbstractContextManager, T] | None:
    """The start every route shares: the handshake allowed (``_allowed``) and its query
    parameters read by ``read`` (400 for a ``BadParams`` or ``FrameError``); None once refused."""
    held = await _allowed(websocket, action, subscription)
    if held is None:
        return None
    try:
        return held, read(websocket.query_params)
    except (BadParams, FrameError) as exc:
        await _refuse(websocket, 400, f"Invalid query params: {exc}")
        return None


async def _serve(
    websocket: WebSocket,
    held: contextlib.AbstractContextManager,
    make: Callable[[Client], Any],
    failed: str,
    busy: tuple[type, ...],
    run: Callable[[Any], Awaitable[None]],
) -> None:
    """Run ``make(client)`` in a thread, then accept and ``run`` what it made, holding
    ``held``; when it fails, refuse the handshake."""
    try:
        client = await websocket_client(websocket.app)
        made = await asyncio.to_thread(make, client)
    except (BadParams, FrameError, InvalidConfiguration) as exc:
        await _refuse(websocket, 400, f"Invalid query params: {exc}")
        return
    except busy as exc:
        await _refuse(websocket, 409, f"{failed}: {exc}")
        return
    except ProducerBlockedQuotaExceededException as exc:
        await _refuse(websocket, 503, f"{failed}: {exc}")
        return
    except (SluiceException, OSError) as exc:
        await _refuse(websocket, 500, f"{failed}: {exc}")
        return
    await websocket.accept()
    with held:
        await run(made)


@router.websocket("/ws/v2/producer" + TOPIC)
async def producer_socket(websocket: WebSocket, tenant: str, namespace: str, topic: str) -> None:
    """A producer: send frames in, ``{"result": ...}`` frames out."""
    opening = await _opening(websocket, "produce", _producer_options)
    if opening is None:
        return
    held, options = opening
    name = _topic(tenant, namespace, topic)
    await _serve(
        websocket,
        held,
        lambda client: client.create_producer(name, **options),
        "Failed to create producer",
        (ProducerBusy,),
        lambda producer: sessions.run_producer(websocket, producer),
    )


def _producer_options(params: QueryParams) -> dict[str, Any]:
    # Pulsar's WebSocket producers: no batching and SinglePartition routing unless asked.
    options: dict[str, Any] = {"message_routing_mode": PartitionsRoutingMode.UseSinglePartition}
    if params.get("producerName"):
        options["producer_name"] = params["producerName"]
    for param, option in (
        ("initialSequenceId", "initial_sequence_id"),
        ("sendTimeoutMillis", "send_timeout_millis"),
        ("batchingMaxMessages", "batching_max_messages"),
        ("maxPendingMessages", "max_pending_messages"),
        ("batchingMaxPublishDelay", "batching_max_publish_delay_ms"),
    ):
        value = _int(params, param)
        if value is not None:
            options[option] = value
    batching = _bool(params, "batchingEnabled")
    if batching is not None:
        options["batching_enabled"] = batching
    mode = params.get("messageRoutingMode")
    if mode is not None:
        if mode not in ROUTING_MODES and mode != "CustomPartition":
            raise BadParams(f"Invalid messageRoutingMode {mode}")
        if mode in ROUTING_MODES:
            options["message_routing_mode"] = ROUTING_MODES[mode]
    compression = params.get("compressionType")
    if compression not in (None, "NONE"):
        raise BadParams(f"compressionType {compression} is not supported")
    hashing = params.get("hashingScheme")
    if hashing not in (None, "Murmur3_32Hash"):
        raise BadParams(f"hashingScheme {hashing} is not supported (Murmur3_32Hash only)")
    return options


@router.websocket("/ws/v2/consumer" + TOPIC + "/{subscription}")
async def consumer_socket(
    websocket: WebSocket, tenant: str, namespace: str, topic: str, subscription: str
) -> None:
    """A consumer: message frames out; acks, negative acks and permits in."""
    name = _topic(tenant, namespace, topic)
    opening = await _opening(
        websocket,
        "consume",
        lambda params: (_consumer_options(params, name, subscription), _queue_size(params)),
        subscription,
    )
    if opening is None:
        return
    held, (options, queue_size) = opening
    pull_mode = _bool(websocket.query_params, "pullMode") is True
    await _serve(
        websocket,
        held,
        lambda client: client.subscribe(
            name, subscription, receiver_queue_size=queue_size, **options
        ),
        "Failed to subscribe",
        (ConsumerBusy, SubscriptionBusy, NotAllowedError),
        lambda consumer: sessions.run_consumer(websocket, consumer, queue_size, pull_mode),
    )


def _consumer_options(params: QueryParams, topic: str, subscription: str) -> dict[str, Any]:
    options: dict[str, Any] = {}
    kind = params.get("subscriptionType")
    if kind is not None:
        if kind not in SUBSCRIPTION_TYPES:
            raise BadParams(f"Invalid subscriptionType {kind}")
        options["consumer_type"] = SUBSCRIPTION_TYPES[kind]
    mode = params.get("subscriptionMode")
    if mode not in (None, "Durable"):
        raise BadParams(f"subscriptionMode {mode} is not supported (Durable only)")
    ack_timeout = _int(params, "ackTimeoutMillis")
    if ack_timeout:
        options["unacked_messages_timeout_ms"] = ack_timeout
    nack_delay = _int(params, "negativeAckRedeliveryDelay")
    if nack_delay is not None:
        options["negative_ack_redelivery_delay_ms"] = nack_delay
    if params.get("consumerName"):
        options["consumer_name"] = params["consumerName"]
    if _int(params, "priorityLevel", 0):
        raise BadParams("priorityLevel is not supported")
    redeliver = _int(params, "maxRedeliverCount")
    dead_letter_topic = params.get("deadLetterTopic")
    if redeliver is not None or dead_letter_topic:
        if redeliver is None:
            raise BadParams("deadLetterTopic needs maxRedeliverCount")
        options["dead_letter_policy"] = DeadLetterPolicy(
            max_redeliver_count=redeliver,
            dead_letter_topic=dead_letter_topic or f"{topic}-{subscription}-DLQ",
        )
    position = params.get("subscriptionInitialPosition")  # Sluice: where a new one starts
    if position is not None:
        if position not in ("Latest", "Earliest"):
            raise BadParams(f"Invalid subscriptionInitialPosition {position}")
        options["initial_position"] = InitialPosition[position]
    return options


@router.websocket("/ws/v2/reader" + TOPIC)
async def reader_socket(websocket: WebSocket, tenant: str, namespace: str, topic: str) -> None:
    """A reader from ``messageId`` (earliest, latest or an id a consumer or reader got)."""
    opening = await _opening(websocket, "consume", _reader_options)
    if opening is None:
        return
    held, (queue_size, start, position) = opening
    name = _topic(tenant, namespace, topic)
    reader_name = websocket.query_params.get("readerName") or None
    await _serve(
        websocket,
        held,
        lambda client: client.subscribe(
            name,
            reader_subscription(),
            consumer_type=ConsumerType.Exclusive,
            receiver_queue_size=queue_size,
            consumer_name=reader_name,
            initial_position=position,
        ),
        "Failed to create reader",
        (),
        lambda consumer: sessions.run_reader(websocket, consumer, queue_size, start),
    )


def _reader_options(params: QueryParams) -> tuple[int, MessageId | None, InitialPosition]:
    """A reader's receiver queue size, the id it starts from (None: at an end) and that end."""
    queue_size = _queue_size(params)
    raw = params.get("messageId") or "latest"
    start = None if raw in ("earliest", "latest") else decode_id(raw)
    position = InitialPosition.Latest if raw == "latest" else InitialPosition.Earliest
    return queue_size, start, position
