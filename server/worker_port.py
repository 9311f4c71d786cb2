"""Which port ``sluice worker`` serves its HTTP endpoint on (/healthz, /readyz, /metrics).

``--http-port N`` asks for port N exactly (``0``: any free port); a busy port is an error.
Without the flag the setting ``SLUICE_WORKER_HTTP_PORT`` decides: ``0`` turns the endpoint
off; a port set there is asked for exactly, like the flag; the default port 8081, when another
worker on the host already holds it, gives way to a free port the system picks, with a
warning that names it, so a second worker started with defaults joins the fleet.  The port
in use is what the worker advertises in its registration.
"""

from __future__ import annotations

import logging
import socket

from server.ports import PortInUse, bind

log = logging.getLogger("sluice.worker")

PURPOSE = "worker HTTP"


def worker_http_socket(
    host: str, flag: int | None, setting: int, setting_is_default: bool
) -> socket.socket | None:
    """The bound socket of the worker's HTTP endpoint, or None when it is off.

    ``flag`` is ``--http-port`` (None when absent), ``setting`` the configured port and
    ``setting_is_default`` whether it was left at its default.  Raises ``PortInUse`` when a
    port asked for exactly is taken.
    """
    if flag is not None:
        return bind(host, flag, PURPOSE, "--http-port (0 = any free port)")
    if not setting:
        return None
    if not setting_is_default:
        return bind(host, setting, PURPOSE, "--http-port or SLUICE_WORKER_HTTP_PORT")
    try:
        return bind(host, setting, PURPOSE, "--http-port")
    except PortInUse:
        sock = bind(host, 0, PURPOSE, "--http-port")
        log.warning(
            "port %d (worker HTTP) is in use, probably by another worker on this host; "
            "serving /healthz, /readyz and /metrics on port %d instead (--http-port chooses)",
            setting,
            sock.getsockname()[1],
        )
        return sock
