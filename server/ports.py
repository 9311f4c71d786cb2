"""A server's ports, checked before it starts: a busy one is one clear line, not a traceback."""

from __future__ import annotations

import errno
import socket
from dataclasses import dataclass


class PortInUse(Exception):
    """A port Sluice is about to listen on is taken; the message says how to choose another."""


@dataclass(frozen=True)
class Port:
    """A port a command is about to listen on, what it is for and how to change it."""

    host: str
    number: int
    purpose: str
    option: str


def is_in_use(host: str, port: int) -> bool:
    """True if binding ``host:port`` fails because something listens there."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return True
            raise
    return False


def check_free(*ports: Port) -> None:
    """Raise ``PortInUse`` for the first port that is taken."""
    for port in ports:
        if port.number and is_in_use(port.host, port.number):
            raise PortInUse(
                f"port {port.number} ({port.purpose}) is already in use: stop what listens "
                f"there, or choose another port with {port.option}"
            )


def bind(host: str, port: int, purpose: str, option: str) -> socket.socket:
    """A socket bound to ``host:port`` (``0``: a port the system picks), ready to listen;
    ``PortInUse`` when the port is taken.  Binding before the server starts leaves no window
    in which another process could take the port, and tells the caller the port it got."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortInUse(
                f"port {port} ({purpose}) is already in use: stop what listens there, "
                f"or choose another port with {option}"
            ) from None
        raise
    return sock
