"""A TCP forwarder for tests: take a server away from its clients without stopping it.

``TcpProxy(target)`` forwards ``127.0.0.1:port`` to ``target`` (a port on 127.0.0.1, or a
``(host, port)`` pair) once started.  ``cut()`` closes the listening socket and every open
connection, so new connections are refused and open ones fail at once; ``restore()`` listens
again on the same port.  While ``drop_on`` is set, a connection whose client sends bytes
containing it is closed before those bytes are forwarded (e.g. ``b"COMMIT"``: the server never
sees the commit and rolls back).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import redis

from server.embedded_redis import free_port
from sluice.protocol.connection import forget_cluster_mode


class TcpProxy:
    """Forwards ``127.0.0.1:port`` to ``target``."""

    def __init__(self, target: tuple[str, int] | int) -> None:
        self.target = ("127.0.0.1", target) if isinstance(target, int) else target
        self.port = free_port()
        self.drop_on: bytes | None = None
        self.dropped = 0
        self._listener: socket.socket | None = None
        self._connections: set[socket.socket] = set()
        self._lock = threading.Lock()

    def start(self) -> TcpProxy:
        """Listen and forward."""
        forget_cluster_mode("127.0.0.1", self.port)  # a Redis server may have had this port
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.settimeout(0.1)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return self

    def _accept(self, listener: socket.socket) -> None:
        while self._listener is listener:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._connections.update((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, from_client: bool) -> None:
        try:
            while data := source.recv(65536):
                marker = self.drop_on
                if from_client and marker is not None and marker in data:
                    self.dropped += 1
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            self._close(source, sink)

    def _close(self, *sockets: socket.socket) -> None:
        for sock in sockets:
            with self._lock:
                self._connections.discard(sock)
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def cut(self) -> None:
        """Refuse new connections and break every open one."""
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        with self._lock:
            connections = list(self._connections)
        self._close(*connections)

    def restore(self) -> None:
        """Accept connections again, on the same port."""
        if self._listener is None:
            self.start()

    def url_for(self, url: str) -> str:
        """``url`` (a SQLAlchemy URL) with host and port pointing at this proxy."""
        from sqlalchemy.engine import make_url

        return (
            make_url(url)
            .set(host="127.0.0.1", port=self.port)
            .render_as_string(hide_password=False)
        )


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
