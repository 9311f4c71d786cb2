"""One WebSocket connection: a producer, a consumer or a reader on the public ``sluice.Client``.

The client is synchronous; its calls that wait on Redis run in worker threads, and each
consumer or reader connection has one thread that receives and hands frames to the event loop.
A consumer is an ordinary ``sluice.Consumer``: the workers dispatch to it under every limit
that applies, exactly as to a Python consumer.  As in Pulsar, at most ``receiverQueueSize``
messages (1000 at most) are out to the client unacknowledged; with ``pullMode=true`` the
client asks for messages with ``permit`` frames instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from dataclasses import KW_ONLY, dataclass, field
from datetime import timedelta
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from api.websocket import frames
from api.websocket.frames import FrameError, WsError
from sluice import Consumer, Producer
from sluice.errors import AlreadyClosed, SluiceException, Timeout
from sluice.message import Message, MessageId
from sluice.producer import Result

log = logging.getLogger(__name__)

RECEIVE_POLL_MS = 200
MAX_QUEUE = 1000  # Pulsar caps a WebSocket consumer's receiverQueueSize at 1000


class Permits:
    """How many more messages may go to the client (thread-safe)."""

    def __init__(self, initial: int) -> None:
        self._count = initial
        self._changed = threading.Condition()

    def add(self, n: int) -> None:
        with self._changed:
            self._count += n
            self._changed.notify_all()

    def take(self, stop: threading.Event) -> bool:
        """Wait for a permit and take it; False once ``stop`` is set."""
        with self._changed:
            while self._count <= 0:
                if stop.is_set():
                    return False
                self._changed.wait(0.2)
            self._count -= 1
            return True


async def run_producer(websocket: WebSocket, producer: Producer) -> None:
    """Send what the client sends; answer each frame with Pulsar's result."""
    loop = asyncio.get_running_loop()
    outgoing: asyncio.Queue[bytes] = asyncio.Queue()

    def answer(payload: bytes) -> None:
        loop.call_soon_threadsafe(outgoing.put_nowait, payload)

    async def writer() -> None:
        while True:
            await websocket.send_text((await outgoing.get()).decode())

    task = asyncio.create_task(writer())
    try:
        while True:
            text = await websocket.receive_text()
            context = None
            try:
                frame = frames.parse_json(text)
                context = frame.get("context")
                fields = frames.producer_message(frame)
            except FrameError as exc:
                outgoing.put_nowait(frames.send_error(exc.code, str(exc), context))
                continue
            after = fields.pop("deliver_after")
            if after is not None:
                fields["deliver_after"] = timedelta(milliseconds=after)

            def done(result: Result, message_id: MessageId | None, context=context) -> None:
                if result is Result.Ok and message_id is not None:
                    answer(frames.send_ok(message_id, context))
                else:
                    answer(frames.send_error(WsError.UnknownError, result.name, context))

            try:
                producer.send_async(callback=done, **fields)
            except SluiceException as exc:
                outgoing.put_nowait(frames.send_error(WsError.UnknownError, str(exc), context))
    except WebSocketDisconnect:
        pass
    finally:
        task.cancel()
        await asyncio.to_thread(producer.close)


@dataclass(eq=False)
class Delivery:
    """Receives from a consumer on a thread and hands frames to the event loop."""

    consumer: Consumer
    permits: Permits
    loop: asyncio.AbstractEventLoop
    outgoing: asyncio.Queue[bytes]
    _: KW_ONLY
    skip_until: MessageId | None = None
    auto_ack: bool = False
    sent: dict[str, MessageId] = field(default_factory=dict, init=False)
    stop: threading.Event = field(default_factory=threading.Event, init=False)
    thread: threading.Thread = field(init=False)

    def __post_init__(self) -> None:
        self.thread = threading.Thread(target=self._run, name="sluice-ws-delivery", daemon=True)

    def _run(self) -> None:
        while self.permits.take(self.stop):
            message = self._next()
            if message is None:
                return
            message_id = message.message_id()
            text = frames.encode_id(message_id)
            if self.auto_ack:
                self.consumer.acknowledge(message)
            else:
                self.sent[text] = message_id
            self.loop.call_soon_threadsafe(
                self.outgoing.put_nowait, frames.consumer_message(message, text)
            )

    def _next(self) -> Message | None:
        while not self.stop.is_set():
            try:
                message = self.consumer.receive(timeout_millis=RECEIVE_POLL_MS)
            except Timeout:
                continue
            except (AlreadyClosed, SluiceException):
                return None
            mark = self.skip_until
            if mark is not None and not mark < message.message_id():
                self.consumer.acknowledge(message)  # a reader starts after its message id
                continue
            return message
        return None

    def message_id(self, text: object) -> MessageId:
        """The id of a message this connection delivered (or any of ours)."""
        known = self.sent.pop(text, None) if isinstance(text, str) else None
        return known or frames.decode_id(text)


async def run_consumer(
    websocket: WebSocket, consumer: Consumer, queue_size: int, pull_mode: bool
) -> None:
    """Deliver messages; take acks, negative acks, permits and unsubscribe by messageId."""
    loop = asyncio.get_running_loop()
    outgoing: asyncio.Queue[bytes] = asyncio.Queue()
    permits = Permits(0 if pull_mode else queue_size)
    delivery = Delivery(consumer, permits, loop, outgoing)
    await _serve(websocket, delivery, outgoing, pull_mode, reader=False)


async def run_reader(
    websocket: WebSocket, consumer: Consumer, queue_size: int, start: MessageId | None
) -> None:
    """Deliver messages from the start position; a client's ack only makes room for more."""
    loop = asyncio.get_running_loop()
    outgoing: asyncio.Queue[bytes] = asyncio.Queue()
    delivery = Delivery(
        consumer, Permits(queue_size), loop, outgoing, skip_until=start, auto_ack=True
    )
    await _serve(websocket, delivery, outgoing, pull_mode=False, reader=True)


async def _serve(
    websocket: WebSocket,
    delivery: Delivery,
    outgoing: asyncio.Queue[bytes],
    pull_mode: bool,
    reader: bool,
) -> None:
    consumer = delivery.consumer

    async def writer() -> None:
        while True:
            await websocket.send_text((await outgoing.get()).decode())

    task = asyncio.create_task(writer())
    delivery.thread.start()
    try:
        while True:
            text = await websocket.receive_text()
            try:
                command = frames.parse_json(text)
                if reader:
                    delivery.permits.add(1)  # Pulsar's reader: an ack makes room, nothing more
                    continue
                await _command(consumer, delivery, command, pull_mode)
            except FrameError as exc:
                await websocket.close(code=1011, reason=f"{exc.code.name}: {exc}"[:120])
                return
            except SluiceException as exc:
                # As Pulsar's proxy: an ack it cannot apply (another topic's id, a consumer
                # closed meanwhile) is logged, and the connection goes on.
                log.warning("websocket consumer %s: %s", consumer.subscription_name(), exc)
    except WebSocketDisconnect:
        pass
    finally:
        task.cancel()
        delivery.stop.set()
        await asyncio.to_thread(delivery.thread.join, 5)
        await asyncio.to_thread(_finish, consumer, reader)


def _finish(consumer: Consumer, reader: bool) -> None:
    """Close a consumer; a reader's subscription is its own and goes with the connection."""
    if reader:
        with contextlib.suppress(SluiceException):
            consumer.unsubscribe()
    consumer.close()


async def _command(
    consumer: Consumer, delivery: Delivery, command: dict[str, Any], pull_mode: bool
) -> None:
    kind = command.get("type")
    if kind == "permit":
        count = command.get("permitMessages")
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise FrameError(
                WsError.FailedToDeserializeFromJSON,
                "Missing required permitMessages field for 'permit' command",
            )
        if pull_mode:
            delivery.permits.add(count)
        return
    if kind == "unsubscribe":
        await asyncio.to_thread(consumer.unsubscribe)
        return
    if kind == "isEndOfTopic":
        delivery.outgoing.put_nowait(b'{"endOfTopic":false}')  # never terminated in Sluice
        return
    message_id = delivery.message_id(command.get("messageId"))
    if kind == "negativeAcknowledge":
        await asyncio.to_thread(consumer.negative_acknowledge, message_id)
    elif kind in (None, "ack"):
        consumer.acknowledge(message_id)
    else:
        raise FrameError(WsError.FailedToDeserializeFromJSON, f"unknown command type {kind!r}")
    if not pull_mode:
        delivery.permits.add(1)
