"""The report task's settings for a test: an empty lake and minute windows, installed as the
Celery app's, and the task's store let go of afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from models.settings import Settings


def task_settings_for(base: Settings, folder: Path) -> Iterator[Settings]:
    """Yield ``base`` with a lake in ``folder`` and minute windows, as the Celery app's
    settings while the test runs (a fixture's body: ``yield from``)."""
    from reports.celery_app import app
    from reports.tasks import _store

    ours = base.model_copy(update={"lake_path": str(folder / "lake"), "report_windows": "minute"})
    kept = app.conf.sluice_settings
    app.conf.sluice_settings = ours
    yield ours
    app.conf.sluice_settings = kept
    # The task keeps one store (and its engine) per database: let go of this one.
    _store(ours.effective_database_url, ours.jdbc_jar).engine.dispose()
    _store.cache_clear()
