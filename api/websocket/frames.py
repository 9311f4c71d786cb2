"""Pulsar's WebSocket frames: what producers send and get back, what consumers get and send.

Message ids travel as base64 of ``MessageId.serialize()`` (opaque to clients, as Pulsar's base64
protobuf ids are); times as ISO-8601 with milliseconds, as Pulsar's ``DateFormatter`` writes
them.  Error codes are Pulsar's ``WebSocketError`` codes.
"""

from __future__ import annotations

import base64
import binascii
from datetime import UTC, datetime
from enum import IntEnum
from typing import Any

import orjson

from sluice.message import Message, MessageId
from sluice.priority import check_priority


class WsError(IntEnum):
    """Pulsar's ``WebSocketError`` codes, as in ``send-error:N``."""

    FailedToCreateProducer = 1
    FailedToSubscribe = 2
    FailedToDeserializeFromJSON = 3
    FailedToSerializeToJSON = 4
    AuthenticationError = 5
    NotAuthorizedError = 6
    PayloadEncodingError = 7
    UnknownError = 8


class FrameError(ValueError):
    """A frame that cannot be used; ``code`` says which ``WsError`` it is."""

    def __init__(self, code: WsError, message: str) -> None:
        super().__init__(message)
        self.code = code


def encode_id(message_id: MessageId) -> str:
    """A message id as clients see it."""
    return base64.b64encode(message_id.serialize()).decode()


def decode_id(text: object) -> MessageId:
    """The message id a client sent back; ``FrameError`` when it is not one of ours."""
    if not isinstance(text, str) or not text:
        raise FrameError(WsError.FailedToDeserializeFromJSON, "messageId is required")
    try:
        return MessageId.deserialize(base64.b64decode(text, validate=True))
    except (binascii.Error, ValueError, TypeError) as exc:
        raise FrameError(WsError.FailedToDeserializeFromJSON, f"invalid messageId: {exc}") from None


def iso_time(ms: int) -> str:
    """Milliseconds since the epoch as ISO-8601 (UTC)."""
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def parse_json(text: str | bytes) -> dict[str, Any]:
    """A frame's JSON object."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise FrameError(WsError.FailedToDeserializeFromJSON, str(exc)) from None
    if not isinstance(value, dict):
        raise FrameError(WsError.FailedToDeserializeFromJSON, "a frame is a JSON object")
    return value


def event_time_ms(value: object) -> int | None:
    """``eventTime`` as Pulsar takes it (ISO-8601) or as milliseconds since the epoch."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
            return int(moment.timestamp() * 1000)
    raise FrameError(WsError.PayloadEncodingError, f"invalid eventTime {value!r}")


def producer_message(frame: dict[str, Any]) -> dict[str, Any]:
    """The fields of a producer's send frame, checked: payload bytes, properties, key,
    event time, deliverAt, deliverAfterMs and Sluice's priority (0..9, default 4)."""
    payload = frame.get("payload")
    if not isinstance(payload, str):
        raise FrameError(WsError.PayloadEncodingError, "payload is required (base64)")
    try:
        data = base64.b64decode(payload, validate=True)
    except binascii.Error as exc:
        raise FrameError(
            WsError.PayloadEncodingError, f"Invalid Base64 message-payload error={exc}"
        ) from None
    properties = frame.get("properties")
    if properties is not None and (
        not isinstance(properties, dict)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in properties.items())
    ):
        raise FrameError(WsError.PayloadEncodingError, "properties must map strings to strings")
    key = frame.get("key")
    if key is not None and not isinstance(key, str):
        raise FrameError(WsError.PayloadEncodingError, "key must be a string")
    if frame.get("replicationClusters"):
        raise FrameError(
            WsError.UnknownError, "replicationClusters is not supported: Sluice does not replicate"
        )
    deliver_at = frame.get("deliverAt")
    deliver_after = frame.get("deliverAfterMs")
    for name, value in (("deliverAt", deliver_at), ("deliverAfterMs", deliver_after)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise FrameError(WsError.PayloadEncodingError, f"{name} must be an integer")
    fields = {
        "content": data,
        "properties": properties or None,
        "partition_key": key,
        "event_timestamp": event_time_ms(frame.get("eventTime")),
        "deliver_at": deliver_at,
        "deliver_after": deliver_after,
    }
    if frame.get("priority") is not None:
        try:
            fields["priority"] = check_priority(frame["priority"])
        except ValueError as exc:
            raise FrameError(WsError.PayloadEncodingError, str(exc)) from None
    return fields


def send_ok(message_id: MessageId, context: object) -> bytes:
    """A producer's ``{"result": "ok", ...}``."""
    answer: dict[str, Any] = {"result": "ok", "messageId": encode_id(message_id)}
    if context is not None:
        answer["context"] = context
    return orjson.dumps(answer)


def send_error(code: WsError, message: str, context: object) -> bytes:
    """A producer's ``{"result": "send-error:N", ...}``."""
    answer: dict[str, Any] = {"result": f"send-error:{int(code)}", "errorMsg": message}
    if context is not None:
        answer["context"] = context
    return orjson.dumps(answer)


def consumer_message(message: Message, message_id: str) -> bytes:
    """What a consumer or reader gets for one message."""
    frame: dict[str, Any] = {
        "messageId": message_id,
        "payload": base64.b64encode(message.data()).decode(),
        "properties": message.properties(),
        "publishTime": iso_time(message.publish_timestamp()),
        "redeliveryCount": message.redelivery_count(),
    }
    if message.event_timestamp():
        frame["eventTime"] = iso_time(message.event_timestamp())
    if message.partition_key():
        frame["key"] = message.partition_key()
    return orjson.dumps(frame)
