"""A TCP forwarder for tests: a port that can be opened and closed, and connections through
it cut, to make a service unreachable and reachable again over a real network path."""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import redis

from server.embedded_redis import free_port


class TcpProxy:
    """Forwards ``127.0.0.1:port`` to ``target_port`` while open; closed, the port refuses
    connections and ``cut`` ends the ones in flight."""

    def __init__(self, target_port: int, port: int | None = None) -> None:
        self.target_port = target_port
        self.port = port or free_port()
        self._listener: socket.socket | None = None
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    def open(self) -> TcpProxy:
        """Start accepting and forwarding."""
        listener = socket.create_server(("127.0.0.1", self.port))
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return self

    def close(self) -> None:
        """Stop accepting (the port refuses connections) and cut every connection."""
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.close()
            self._listener = None
        self.cut()

    def cut(self) -> None:
        """End every forwarded connection (the port stays open)."""
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)


def eventually(check, timeout: float = 10.0):
    """``check()``'s first true answer, calls that fail with a Redis error counting as false
    (the service behind the forwarder is not reachable yet)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
            if result:
                return result
        except redis.RedisError:
            pass
        assert time.monotonic() < deadline, "never became true"
        time.sleep(0.1)
