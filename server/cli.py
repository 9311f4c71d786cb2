"""The sluice command: run Sluice's processes.

sluice standalone [--port 8080]     admin service, worker, reports, embedded Redis + SQLite
sluice api [--host H] [--port P]    the admin service alone (database must be migrated)
sluice worker [--http-port P] ...   a broker worker (--redis-url, --database-url, --id)
sluice migrate [--revision R]       upgrade (or --downgrade) the control-plane schema
sluice tokens ...                   create keys and authentication tokens
sluice redis-acl-file [--output F]  the Redis ACL file of a secured data plane (service users)
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import sys
from typing import TYPE_CHECKING

from server.ports import Port, PortInUse, check_free

if TYPE_CHECKING:
    from models.settings import Settings

# Modules of the ``server`` extra every command needs; without them the command says what to
# install instead of failing on an import deep inside.
SERVER_MODULES = ("pydantic_settings", "sqlalchemy", "fastapi", "uvicorn", "alembic", "jwt")
SERVER_EXTRA_HINT = "pip install 'sluice-dispatch[server]'"


def missing_server_module() -> str | None:
    """The first module of the server extra that cannot be imported, or None."""
    for name in SERVER_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            return name
    return None


def _api(args: argparse.Namespace, settings: Settings) -> int:
    import uvicorn
    from uvicorn.config import STARTUP_FAILURE

    from api.app import create_app
    from server.http_protocol import HTTP_PROTOCOL
    from server.quiet_server import QuietServer

    check_free(Port(args.host, args.port, "admin API", "--port"))
    settings = settings.model_copy(update={"http_host": args.host, "http_port": args.port})
    config = uvicorn.Config(
        create_app(settings),
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        http=HTTP_PROTOCOL,
    )
    server = QuietServer(config)
    with contextlib.suppress(KeyboardInterrupt):
        server.run()
    # As uvicorn.run: a service that never started (its app's start-up failed) exits 3.
    return 0 if server.started else STARTUP_FAILURE


def _worker(args: argparse.Namespace, settings: Settings) -> int:
    import asyncio

    from server.worker_port import worker_http_socket
    from workers.gcpolicy import tune_collector
    from workers.main import run_worker

    updates: dict[str, object] = {}
    if args.redis_url:
        updates["redis_url"] = args.redis_url
    if args.database_url:
        updates["database_url"] = args.database_url
    if args.id:
        updates["worker_id"] = args.id
    settings = settings.model_copy(update=updates)
    sock = worker_http_socket(
        settings.http_host,
        args.http_port,
        settings.worker_http_port,
        "worker_http_port" not in settings.model_fields_set,
    )
    port = sock.getsockname()[1] if sock is not None else 0
    settings = settings.model_copy(update={"worker_http_port": port})
    tune_collector()
    asyncio.run(run_worker(settings, http_socket=sock))
    return 0


def _migrate(args: argparse.Namespace, settings: Settings) -> int:
    from migrations import downgrade, upgrade

    url = settings.effective_database_url
    if args.downgrade:
        downgrade(url, args.downgrade)
    else:
        upgrade(url, args.revision)
    return 0


def _standalone(args: argparse.Namespace, settings: Settings) -> int:
    from server.standalone import run_standalone

    return run_standalone(settings, args)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``sluice``."""
    parser = argparse.ArgumentParser(
        prog="sluice",
        description="Run Sluice's processes.",
        epilog="commands:\n" + "".join(f"  {line}\n" for line in (__doc__ or "").splitlines()[2:]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--log-level", default="info", help="debug, info, warning, error")
    # Every command takes --log-level after its name too (``sluice worker --log-level debug``);
    # absent there, the one before the command (or its default) stands.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--log-level", default=argparse.SUPPRESS, help="debug, info, warning, error"
    )
    commands = parser.add_subparsers(dest="command", required=True)

    standalone = commands.add_parser(
        "standalone", parents=[common], help="run everything in one process tree"
    )
    standalone.add_argument("--port", type=int, default=None, help="admin port (default 8080)")
    standalone.add_argument("--host", default=None, help="admin bind address (default 0.0.0.0)")
    standalone.add_argument(
        "--redis-port", type=int, default=6650, help="embedded Redis port (default 6650)"
    )
    standalone.add_argument("--data-dir", default=None, help="data folder (default ./data)")
    standalone.add_argument(
        "--no-reports", action="store_true", help="do not run the report scheduler"
    )
    standalone.set_defaults(func=_standalone)

    api = commands.add_parser("api", parents=[common], help="run the admin service")
    api.add_argument("--host", default="0.0.0.0")
    api.add_argument("--port", type=int, default=8080)
    api.set_defaults(func=_api)

    worker = commands.add_parser("worker", parents=[common], help="run a broker worker")
    worker.add_argument(
        "--http-port",
        type=int,
        default=None,
        help="port of /healthz, /readyz and /metrics; 0 = any free port (default "
        "SLUICE_WORKER_HTTP_PORT, else 8081, else a free port when 8081 is taken)",
    )
    worker.add_argument("--redis-url", default=None, help="data-plane Redis (default REDIS_URL)")
    worker.add_argument(
        "--database-url", default=None, help="control-plane database (default DATABASE_URL)"
    )
    worker.add_argument(
        "--id", default=None, help="worker id (default SLUICE_WORKER_ID, else hostname-pid)"
    )
    worker.set_defaults(func=_worker)

    migrate = commands.add_parser(
        "migrate", parents=[common], help="migrate the control-plane database"
    )
    migrate.add_argument("--revision", default="head", help="target revision (default head)")
    migrate.add_argument("--downgrade", metavar="REVISION", help="downgrade to REVISION instead")
    migrate.set_defaults(func=_migrate)

    from server.tokens_cli import add_tokens_parser

    add_tokens_parser(commands)

    from server.acl_file import add_acl_file_parser

    add_acl_file_parser(commands, [common])
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``sluice``."""
    missing = missing_server_module()
    if missing is not None:
        print(
            f"sluice: the server is not installed (no module {missing!r}): {SERVER_EXTRA_HINT}",
            file=sys.stderr,
        )
        return 1
    from models.settings import Settings

    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    # Alembic announces each of its plugins at INFO on every start: noise, not news.
    logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)
    try:
        return int(args.func(args, Settings()))
    except PortInUse as exc:
        print(f"sluice: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
