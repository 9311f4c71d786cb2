"""Standalone mode: every Sluice component on one machine with embedded defaults.

Like ``pulsar standalone``: nothing to configure.  The control plane lives in a SQLite file
and the data plane in an embedded Redis server, both under the data folder, unless
``DATABASE_URL`` / ``REDIS_URL`` point elsewhere.  The schema is migrated on start.  The admin
service runs in the standalone's own process; the broker worker is a child process
(``sluice worker``, on ``SLUICE_WORKER_HTTP_PORT``, default 8081), so a busy worker (many
partitions, a high dispatch rate) shares neither an event loop nor an interpreter lock with
the admin API.  Both open the same SQLite file (WAL, with a busy timeout: a writer waits for
the other's transaction instead of failing).  When the reporting extra is installed, a
Celery worker with an embedded beat (one process, solo pool) lands stats and runs the report
jobs on schedule (``--no-reports`` leaves it out); it runs at niceness 10, so a report's
Spark run yields the cores to the admin service and the worker.

What the standalone starts, it supervises (``server.supervisor``): the embedded Redis, the
broker worker and the report scheduler are restarted when they die, with exponential
backoff; each child dies with the standalone, and writes its log lines to the same terminal.
The embedded Redis keeps an append-only file (fsync every second) in its folder, so a
restarted server has every write it acknowledged before it was killed; it comes back on the
same port, and the admin service, the worker and clients reconnect by themselves.  Ctrl-C or
SIGTERM stops the admin service, then the worker, the report scheduler, and Redis last.

With authentication on (``SLUICE_AUTHENTICATION_ENABLED``), the embedded Redis runs with an
ACL file (``dataplane.acl``): the ``default`` user is off, the admin service, the worker and
the report scheduler connect as their own users (passwords made once, kept in the Redis
folder), and clients get session users from the admin service (``sluice.Client`` on the
admin service's URL with their token).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import logging
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import uvicorn

from api.app import create_app
from dataplane.acl import SERVICE_USERS, render_acl_file
from migrations import upgrade
from models.settings import Settings
from reports.parent_watch import PARENT_ENV
from server.acl_file import write_private
from server.embedded_redis import EmbeddedRedis, die_with_parent
from server.http_protocol import HTTP_PROTOCOL
from server.ports import Port, check_free
from server.quiet_server import QuietServer
from server.supervisor import SupervisedProcess, describe_exit
from sluice.protocol.urls import redact_url, with_credentials

log = logging.getLogger("sluice.standalone")
ACL_FILE = "users.acl"
WORKER_START_SECONDS = 60.0  # a (re)started worker must answer /healthz within this long
CELERY_ROOT_WARNING = "You're running the worker with superuser privileges"
SCHEDULER_STOP_SECONDS = 5.0  # a stop waits this long for the scheduler, then kills it
REPORT_NICENESS = 10  # the report scheduler and its Spark runs: background work


def run_standalone(settings: Settings, args: argparse.Namespace) -> int:
    """Start the embedded services and the admin service; block until interrupted."""
    settings = _with_arguments(settings, args)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    run_dir = settings.data_dir / "run"  # pid files of the children
    children: list[SupervisedProcess] = []
    service_urls: dict[str, str] = {}
    if not settings.redis_url:
        settings, service_urls = _start_redis(settings, args.redis_port, run_dir, children)
    try:
        upgrade(settings.effective_database_url)
        log.info("database: %s", redact_url(settings.effective_database_url))
        log.info("redis (client service URL): %s", redact_url(settings.effective_redis_url))
        log.info("admin API: http://localhost:%d/admin/v2", settings.http_port)
        if not getattr(args, "no_reports", False):
            scheduler = report_scheduler(
                settings, args.log_level, run_dir, service_urls.get("reports")
            )
            if scheduler is not None:
                children.append(scheduler.start())
        # Not waited for: the admin service serves while the worker starts.
        worker = broker_worker(settings, args.log_level, run_dir, service_urls.get("worker"))
        children.append(worker.start(wait=False))
        log.info(
            "broker worker: pid %d (%s), sluice worker with /healthz, /readyz and /metrics %s",
            worker.process.pid if worker.process else 0,
            worker.pid_file,
            f"on port {settings.worker_http_port}" if settings.worker_http_port else "off",
        )
        asyncio.run(_serve(settings, args.log_level, children))
    finally:
        # The worker first, then the report scheduler, the Redis everything uses last.
        for child in reversed(children):
            child.stop()
        log.info("Sluice standalone stopped: every process it started has exited")
    return 0


def _with_arguments(settings: Settings, args: argparse.Namespace) -> Settings:
    """The settings with the command line's data folder, port and host, once every port
    they name is known to be free (one clear line otherwise)."""
    updates: dict[str, object] = {}
    if args.data_dir:
        updates["data_dir"] = Path(args.data_dir)
    if args.port:
        updates["http_port"] = args.port
    if args.host:
        updates["http_host"] = args.host
    settings = settings.model_copy(update=updates)
    check_free(
        Port(settings.http_host, settings.http_port, "admin API", "--port"),
        Port(
            "127.0.0.1",
            0 if settings.redis_url else args.redis_port,
            "embedded Redis",
            "--redis-port",
        ),
        Port(
            settings.http_host,
            settings.worker_http_port,
            "worker metrics",
            "SLUICE_WORKER_HTTP_PORT (0 turns it off)",
        ),
    )
    return settings


def _start_redis(
    settings: Settings, port: int, run_dir: Path, children: list[SupervisedProcess]
) -> tuple[Settings, dict[str, str]]:
    """Start the embedded Redis (appended to ``children``): the settings pointing at it, and
    the service users' URLs when authentication is on."""
    folder = settings.data_dir / "redis"
    passwords = embedded_acl(folder) if settings.authentication_enabled else None
    embedded = EmbeddedRedis(
        folder,
        port,
        appendonly=True,
        # Background tasks once a second, not ten times (an idle server's main cost): a key
        # past its TTL is still gone when read, blocking reads still time out to the
        # millisecond, and the append-only file is still written before every reply.
        extra_args=("--appendfsync", "everysec", "--hz", "1"),
        acl_file=folder / ACL_FILE if passwords else None,
        username=SERVICE_USERS["api"] if passwords else None,
        password=passwords["api"] if passwords else None,
    )
    redis_child = SupervisedProcess(
        "redis-server", embedded.spawn, ready=embedded.wait_ready, pid_dir=run_dir
    ).start()
    children.append(redis_child)
    log.info(
        "embedded Redis: pid %d (%s), append-only file in %s",
        redis_child.process.pid if redis_child.process else 0,
        redis_child.pid_file,
        embedded.directory,
    )
    settings = settings.model_copy(update={"redis_url": embedded.url})
    if not passwords:
        return settings, {}
    plain = f"redis://127.0.0.1:{embedded.port}/0"
    log.info(
        "embedded Redis ACLs: default user off, service users %s, clients get "
        "session users from the admin service",
        ", ".join(SERVICE_USERS.values()),
    )
    return settings, {
        service: with_credentials(plain, SERVICE_USERS[service], passwords[service])
        for service in ("worker", "reports")
    }


def embedded_acl(folder: Path) -> dict[str, str]:
    """The service users' passwords of a secured embedded Redis, made once and kept in
    ``folder`` (mode 0600), and its ACL file written next to them (``dataplane.acl``)."""
    folder.mkdir(parents=True, exist_ok=True)
    stored = folder / "service-passwords.json"
    if stored.exists():
        passwords = json.loads(stored.read_text())
    else:
        passwords = {service: secrets.token_urlsafe(24) for service in SERVICE_USERS}
        write_private(stored, json.dumps(passwords))
    write_private(folder / ACL_FILE, render_acl_file(passwords))
    return passwords


def celery_worker(*options: str) -> list[str]:
    """The command line of a Celery worker of the report tasks, with the worker's
    ``options``."""
    return [sys.executable, "-m", "celery", "-A", "reports.celery_app:app", "worker", *options]


def _in_the_background() -> None:
    """In the report scheduler's child before exec: it dies with the standalone, and it and
    what it starts (a report's Spark JVM, a minute of a core or more) yield the CPU to the
    admin service and the worker (``REPORT_NICENESS``)."""
    die_with_parent()
    os.nice(REPORT_NICENESS)


def report_scheduler(
    settings: Settings, log_level: str, run_dir: Path, redis_url: str | None = None
) -> SupervisedProcess | None:
    """Celery worker + beat for reporting (not started yet), or None without the reports
    extra; ``redis_url`` replaces the settings' (the reports' own Redis user)."""
    if importlib.util.find_spec("pyspark") is None:
        log.info("reporting off: install the 'reports' extra to run the report jobs")
        return None
    env = dict(os.environ)
    env.update(
        {
            "DATABASE_URL": settings.effective_database_url,
            "REDIS_URL": redis_url or settings.effective_redis_url,
            "SLUICE_DATA_DIR": str(settings.data_dir.resolve()),
        }
    )
    if os.geteuid() == 0:
        # Celery warns at every start as root; the standalone runs the scheduler as the user
        # who started it (the README's fresh machine is root), and the scheduler takes JSON
        # only, which is what makes root dangerous for Celery.  Said once, here.
        log.info("report scheduler: runs as root, like this standalone (JSON tasks only)")
        warnings_env = [env.get("PYTHONWARNINGS", ""), f"ignore:{CELERY_ROOT_WARNING}"]
        env["PYTHONWARNINGS"] = ",".join(w for w in warnings_env if w)
    command = celery_worker(
        "--beat",
        "--pool",
        "solo",
        # The standalone's one scheduler has no peers to greet, gossip with or send
        # heartbeat events to (nothing reads them): without them it is quiet at rest.
        "--without-mingle",
        "--without-gossip",
        "--without-heartbeat",
        "--loglevel",
        log_level.upper(),
        "--hostname",
        f"sluice-standalone-{os.getpid()}@%h",
    )

    def spawn() -> subprocess.Popen:
        # A session of its own, like the embedded Redis: a Ctrl-C reaches the standalone,
        # which stops the scheduler itself (and does not mistake its exit for a crash).  If
        # the standalone dies first, the scheduler kills its own group (reports.parent_watch).
        return subprocess.Popen(
            command,
            env={**env, PARENT_ENV: str(os.getpid())},
            preexec_fn=_in_the_background,
            start_new_session=True,
        )

    log.info("report scheduler: Celery worker with beat (schedule %s)", settings.report_schedule)
    # Stopped with SIGQUIT too: a stop does not wait for a running report to finish (its task
    # is acknowledged late, so Celery delivers it again, as after a crash of the scheduler).
    return SupervisedProcess(
        "report-scheduler",
        spawn,
        pid_dir=run_dir,
        stop_signal=signal.SIGQUIT,
        stop_timeout=SCHEDULER_STOP_SECONDS,
    )


def broker_worker(
    settings: Settings, log_level: str, run_dir: Path, redis_url: str | None = None
) -> SupervisedProcess:
    """``sluice worker`` as a supervised child (not started yet), on the standalone's
    database, Redis (``redis_url``: the worker's own Redis user) and data folder, serving
    /healthz, /readyz and /metrics on ``worker_http_port`` (0: none)."""
    env = dict(os.environ)
    env.update(
        {
            "DATABASE_URL": settings.effective_database_url,
            "REDIS_URL": redis_url or settings.effective_redis_url,
            "SLUICE_DATA_DIR": str(settings.data_dir.resolve()),
            "SLUICE_HTTP_HOST": settings.http_host,
            "SLUICE_HTTP_PORT": str(settings.http_port),
            "SLUICE_WORKER_HTTP_PORT": str(settings.worker_http_port),
            # One id across restarts: a restarted worker takes its own partitions back at
            # once instead of waiting for its previous incarnation's heartbeat to expire.
            "SLUICE_WORKER_ID": settings.worker_id or "standalone",
        }
    )
    command = [sys.executable, "-m", "server.cli", "--log-level", log_level, "worker"]
    if settings.worker_http_port:
        command += ["--http-port", str(settings.worker_http_port)]

    def spawn() -> subprocess.Popen:
        # A session of its own, like the other children: the standalone stops it on Ctrl-C,
        # after the admin service and before the Redis it uses.
        return subprocess.Popen(
            command, env=env, preexec_fn=die_with_parent, start_new_session=True
        )

    ready = None
    if settings.worker_http_port:
        ready = healthz_ready(settings.http_host, settings.worker_http_port)
    return SupervisedProcess("worker", spawn, ready=ready, pid_dir=run_dir)


def healthz_ready(
    host: str, port: int, timeout: float = WORKER_START_SECONDS
) -> Callable[[subprocess.Popen], None]:
    """A readiness check for a worker child: it answers on ``/healthz`` (its event loop runs);
    raises when the child exits first or does not answer within ``timeout`` seconds."""
    local = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
    url = f"http://{f'[{local}]' if ':' in local else local}:{port}/healthz"

    def ready(process: subprocess.Popen) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(
                    f"the worker exited at start: {describe_exit(process.returncode)}"
                )
            try:
                with urllib.request.urlopen(url, timeout=1.0) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"the worker did not answer {url} within {timeout:.0f} s")
            time.sleep(0.1)

    return ready


async def _announce_when_up(
    settings: Settings, server: uvicorn.Server, children: list[SupervisedProcess]
) -> None:
    """One line once the admin service and every child serve: where to go, where data is."""
    while not server.started:
        await asyncio.sleep(0.05)
    try:
        for child in children:
            await asyncio.to_thread(child.wait_ready)
    except Exception as exc:  # the supervisor says what went wrong and restarts the child
        log.warning("Sluice standalone is up without all its parts: %s", exc)
        return
    base = f"http://localhost:{settings.http_port}"
    log.info(
        "Sluice standalone is up: admin API %s/admin/v2, console %s/console, data plane %s, "
        "data in %s (Ctrl-C stops it)",
        base,
        base,
        redact_url(settings.effective_redis_url),
        settings.data_dir.resolve(),
    )


async def _serve(settings: Settings, log_level: str, children: list[SupervisedProcess]) -> None:
    """The admin service, the children supervised, until SIGINT/SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    server = QuietServer(
        uvicorn.Config(
            create_app(settings),
            host=settings.http_host,
            port=settings.http_port,
            log_level=log_level,
            http=HTTP_PROTOCOL,  # requests refused by the HTTP parser get a JSON reason too
        )
    )
    server.install_signal_handlers = lambda: None  # type: ignore[attr-defined]
    api = asyncio.create_task(server.serve())
    supervisors = [asyncio.create_task(child.supervise(stop)) for child in children]
    announce = asyncio.create_task(_announce_when_up(settings, server, children))
    await stop.wait()
    announce.cancel()
    server.should_exit = True
    await asyncio.gather(api, *supervisors, return_exceptions=True)
