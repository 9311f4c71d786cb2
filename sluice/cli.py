"""The sluice command: run Sluice's processes.

sluice standalone [--port 8080]     admin service, worker, reports, embedded Redis + SQLite
sluice api [--host H] [--port P]    the admin service alone (database must be migrated)
sluice worker                       a broker worker
sluice migrate [--revision R]       upgrade (or --downgrade) the control-plane schema
sluice tokens ...                   create keys and authentication tokens
"""

from __future__ import annotations

import argparse
import logging
import sys

from models.settings import Settings
from sluice.ports import Port, PortInUse, check_free


def _api(args: argparse.Namespace, settings: Settings) -> int:
    import uvicorn

    from api.app import create_app

    check_free(Port(args.host, args.port, "admin API", "--port"))
    settings = settings.model_copy(update={"http_host": args.host, "http_port": args.port})
    uvicorn.run(create_app(settings), host=args.host, port=args.port, log_level=args.log_level)
    return 0


def _worker(args: argparse.Namespace, settings: Settings) -> int:
    import asyncio

    from workers.main import run_worker

    asyncio.run(run_worker(settings))
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
    from sluice.standalone import run_standalone

    return run_standalone(settings, args)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``sluice``."""
    parser = argparse.ArgumentParser(
        prog="sluice",
        description="Run Sluice's processes.",
        epilog="commands:\n" + "".join(f"  {line}\n" for line in __doc__.splitlines()[2:]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--log-level", default="info", help="debug, info, warning, error")
    commands = parser.add_subparsers(dest="command", required=True)

    standalone = commands.add_parser("standalone", help="run everything in one process tree")
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

    api = commands.add_parser("api", help="run the admin service")
    api.add_argument("--host", default="0.0.0.0")
    api.add_argument("--port", type=int, default=8080)
    api.set_defaults(func=_api)

    worker = commands.add_parser("worker", help="run a broker worker")
    worker.set_defaults(func=_worker)

    migrate = commands.add_parser("migrate", help="migrate the control-plane database")
    migrate.add_argument("--revision", default="head", help="target revision (default head)")
    migrate.add_argument("--downgrade", metavar="REVISION", help="downgrade to REVISION instead")
    migrate.set_defaults(func=_migrate)

    from sluice.tokens_cli import add_tokens_parser

    add_tokens_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``sluice``."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    # Alembic announces each of its plugins at INFO on every start: noise, not news.
    logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)
    try:
        return args.func(args, Settings())
    except PortInUse as exc:
        print(f"sluice: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
