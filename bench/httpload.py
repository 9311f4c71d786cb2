"""A lean HTTP/1.1 load generator (keep-alive, open or closed loop) for the benchmarks.

A general-purpose client spends more CPU per request than the server under test, so at a few
hundred requests per second it measures itself.  This one writes requests by hand over a
pool of persistent connections and parses only the status line and Content-Length.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import Awaitable, Callable, Iterator
from urllib.parse import urlsplit


class Connection:
    """One keep-alive connection."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    async def request(self, raw: bytes) -> int:
        """Send one prepared request; return the status code (the body is read and dropped)."""
        self.writer.write(raw)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        length = 0
        for line in head.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        if length:
            await self.reader.readexactly(length)
        return status


def prepare(url: str, method: str, path: str, body: bytes = b"") -> bytes:
    """The bytes of one request."""
    host = urlsplit(url).netloc
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}", "Connection: keep-alive"]
    if body:
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def connect(url: str, count: int) -> list[Connection]:
    """Open ``count`` connections."""
    parts = urlsplit(url)
    pairs = [await asyncio.open_connection(parts.hostname, parts.port) for _ in range(count)]
    return [Connection(r, w) for r, w in pairs]


async def open_loop(url: str, raw: bytes, rate: float, seconds: float) -> list[float]:
    """Requests at a fixed rate whatever the answers (latency includes any queueing), ms.

    Latency counts from when a request was due, so a late client counts against the server
    too; the client's garbage collector is kept off while it runs so that its own pauses do
    not."""
    with _collector_paused():
        return await _open_loop(url, raw, rate, seconds)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


async def _open_loop(url: str, raw: bytes, rate: float, seconds: float) -> list[float]:
    pool = await connect(url, 64)
    idle: asyncio.Queue[Connection] = asyncio.Queue()
    for connection in pool:
        idle.put_nowait(connection)
    latencies: list[float] = []

    async def one(scheduled: float) -> None:
        connection = await idle.get()
        status = await connection.request(raw)
        latencies.append((time.perf_counter() - scheduled) * 1000)
        idle.put_nowait(connection)
        if status >= 400:
            raise RuntimeError(f"HTTP {status}")

    start = time.perf_counter()
    tasks = []
    for i in range(int(rate * seconds)):
        scheduled = start + i / rate
        delay = scheduled - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(scheduled)))
    await asyncio.gather(*tasks)
    for connection in pool:
        connection.writer.close()
    return latencies


async def run_on(pool: list[Connection], work: Callable[[Connection], Awaitable[None]]) -> float:
    """``work`` on every connection of ``pool`` at once, then the connections closed: the
    seconds the work took."""
    started = time.perf_counter()
    await asyncio.gather(*(work(c) for c in pool))
    took = time.perf_counter() - started
    for connection in pool:
        connection.writer.close()
    return took


async def closed_loop(
    url: str, requests, workers: int, seconds: float
) -> tuple[list[float], float]:
    """``workers`` clients sending back to back; ``requests(n)`` makes the n-th request."""
    pool = await connect(url, workers)
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds
    counter = iter(range(10**9))

    async def loop(connection: Connection) -> None:
        while time.perf_counter() < deadline:
            raw = requests(next(counter))
            started = time.perf_counter()
            status = await connection.request(raw)
            latencies.append((time.perf_counter() - started) * 1000)
            if status >= 400:
                raise RuntimeError(f"HTTP {status}")

    elapsed = await run_on(pool, loop)
    return latencies, len(latencies) / elapsed
