"""Workers whose database connections go through a ``tests.tcp_proxy.TcpProxy``."""

from __future__ import annotations

from tests.tcp_proxy import TcpProxy


def worker_through(proxy: TcpProxy, settings, worker_id: str, resync_seconds: float):
    """A worker (no HTTP endpoint) whose database connections go through ``proxy``,
    started."""
    from tests.workers.conftest import WorkerThread

    update = {
        "database_url": proxy.url_for(settings.database_url),
        "worker_http_port": 0,
        "worker_id": worker_id,
        "worker_resync_seconds": resync_seconds,
    }
    return WorkerThread(settings.model_copy(update=update)).start()
