"""The Celery app that schedules reporting: ``celery -A reports.celery_app:app worker|beat``.

Broker and result backend are the data-plane Redis (``REDIS_URL``; on a Redis Cluster, the
master ``reports.celery_redis`` names).  Beat lands stats every
``SLUICE_LANDING_INTERVAL_SECONDS`` and runs the report jobs on ``SLUICE_REPORT_SCHEDULE``
(cron, UTC).  The tasks themselves are in ``reports.tasks``.
"""

from __future__ import annotations

from celery import Celery
from celery.schedules import crontab
from celery.signals import beat_init, worker_init, worker_shutting_down

from models.settings import Settings
from reports.celery_redis import celery_redis
from reports.parent_watch import watch_parent

QUEUE = "sluice-reports"


def cron(expression: str) -> crontab:
    """A Celery crontab from a five-field cron expression."""
    fields = expression.split()
    if len(fields) != 5:
        raise ValueError(f"Invalid cron expression '{expression}': need 5 fields")
    minute, hour, day_of_month, month_of_year, day_of_week = fields
    return crontab(
        minute=minute,
        hour=hour,
        day_of_month=day_of_month,
        month_of_year=month_of_year,
        day_of_week=day_of_week,
    )


def make_celery(settings: Settings) -> Celery:
    """The Celery app for ``settings``."""
    app = Celery("sluice", include=["reports.tasks"])
    # Only a configured URL is asked whether it is a cluster (the default is a single server).
    url, options = celery_redis(settings.effective_redis_url, probe=bool(settings.redis_url))
    app.conf.update(
        broker_url=url,
        result_backend=url,
        broker_transport_options=options,
        result_backend_transport_options=options,
        result_expires=86_400,
        task_default_queue=QUEUE,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        broker_connection_retry_on_startup=True,
        timezone="UTC",
        enable_utc=True,
        beat_schedule_filename=str(settings.data_dir / "celerybeat-schedule"),
        beat_schedule={
            "land-stats": {
                "task": "sluice.land_stats",
                "schedule": settings.landing_interval_seconds,
            },
            "run-reports": {
                "task": "sluice.run_reports",
                "schedule": cron(settings.report_schedule),
                "kwargs": {"skip_unchanged": settings.report_skip_unchanged},
            },
        },
    )
    app.conf.sluice_settings = settings
    return app


@beat_init.connect
def _data_dir(sender, **_kwargs) -> None:
    """Beat keeps its schedule state under the data folder: make sure it exists."""
    settings: Settings = sender.app.conf.sluice_settings
    settings.data_dir.mkdir(parents=True, exist_ok=True)


@worker_shutting_down.connect
def _cold_shutdown_stops_spark(how: str = "", **_kwargs) -> None:
    """A cold shutdown (SIGQUIT: how the standalone stops its scheduler) does not wait for
    the running report, and exits without running ``atexit``: its Spark JVM, which would
    outlive it, goes first.  A warm one lets the report finish, then ``atexit`` kills it."""
    if how == "Cold":
        from reports.session import kill_jvm

        kill_jvm()


@worker_init.connect
def _die_with_the_standalone(**_kwargs) -> None:
    """Under ``sluice standalone``: go, with everything started, when the standalone goes."""
    watch_parent()


app = make_celery(Settings())
