"""Queueing report runs from the admin service: one Celery app per process, made on first use.

The app only sends tasks (to the data-plane Redis); it is built the first time a run is
queued, shared by every later request, and closed when the service stops.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from models.settings import Settings

SEND_TIMEOUT_SECONDS = 10.0  # how long a request waits for the broker to take the task
RUN_REPORTS = "sluice.run_reports"


class ReportQueue:
    """Sends ``sluice.run_reports`` tasks through a Celery app built once."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._app: Any = None
        self._lock = threading.Lock()

    def _celery(self) -> Any:
        with self._lock:
            if self._app is None:
                from reports.celery_app import make_celery  # Celery loads on first use only

                self._app = make_celery(self._settings)
            return self._app

    def _send(
        self,
        jobs: list[str],
        lookback: float | None,
        run_ids: dict[str, int] | None,
        task_id: str | None,
    ) -> str:
        kwargs: dict[str, Any] = {"jobs": jobs, "lookback_seconds": lookback}
        if run_ids is not None:
            kwargs["run_ids"] = run_ids
        task = self._celery().send_task(RUN_REPORTS, kwargs=kwargs, task_id=task_id)
        return task.id

    async def send(
        self,
        jobs: list[str],
        lookback: float | None,
        run_ids: dict[str, int] | None = None,
        task_id: str | None = None,
    ) -> str:
        """Queue one run of ``jobs``; the task id.  ``run_ids`` (job -> id) are the runs
        recorded for it, ``task_id`` the id to give the task (default: a new one).  Raises on
        timeout or broker errors."""
        return await asyncio.wait_for(
            asyncio.to_thread(self._send, jobs, lookback, run_ids, task_id),
            timeout=SEND_TIMEOUT_SECONDS,
        )

    def close(self) -> None:
        """Release the app's connections (a later ``send`` builds a new app)."""
        with self._lock:
            if self._app is not None:
                self._app.close()
                self._app = None
