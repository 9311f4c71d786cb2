"""``server.quiet_server``: uvicorn's housekeeping once a second, a stop noticed at once."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import httpx
import uvicorn

from server.quiet_server import QuietServer


async def _hello(scope, receive, send) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"hello"})


class _Counted(QuietServer):
    ticks = 0

    async def on_tick(self, counter: int) -> bool:
        type(self).ticks += 1
        return await super().on_tick(counter)


def _listening() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock


def test_it_ticks_once_a_second_keeps_the_date_fresh_and_stops_at_once():
    sock = _listening()
    port = sock.getsockname()[1]
    server = _Counted(uvicorn.Config(_hello, log_level="warning", lifespan="off"))

    async def scenario() -> tuple[int, list[str], float]:
        serving = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.01)
        ticks_before = _Counted.ticks
        dates = []
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            for _ in range(2):
                answer = await client.get("/")
                assert answer.text == "hello"
                dates.append(answer.headers["date"])
                await asyncio.sleep(1.6)
        ticks = _Counted.ticks - ticks_before
        # A stop from another thread, as a signal handler's would be: the loop sleeps in select.
        asked = time.monotonic()
        threading.Thread(target=setattr, args=(server, "should_exit", True)).start()
        await asyncio.wait_for(serving, 5)
        return ticks, dates, time.monotonic() - asked

    ticks, dates, stopped_after = asyncio.run(scenario())
    # uvicorn's own loop ticks every 0.1 s: about 32 ticks in these 3.2 s.
    assert ticks <= 5, ticks
    assert dates[0] != dates[1], dates
    assert stopped_after < 0.5, stopped_after
