"""Argument parsing and the run loop of ``sluice-admin``.

Global options may come before the command group (as with ``pulsar-admin``) or after the
command; only the client config file's ``--config`` must come first, since
``brokers ... --config`` names a configuration key.
"""

from __future__ import annotations

import argparse
import sys

from sluice.admin_cli.client import NO_CONTENT, AdminClient, AdminError
from sluice.admin_cli.commands import GROUPS
from sluice.admin_cli.config import DEFAULT_URL, ConfigError, resolve
from sluice.admin_cli.output import FORMATS, OutputError, render, terminal_width

PROG = "sluice-admin"


def _connection_options(parser: argparse.ArgumentParser, suppress: bool) -> None:
    def default(value):
        return argparse.SUPPRESS if suppress else value

    parser.add_argument(
        "--admin-url",
        default=default(None),
        help=f"admin service URL (env SLUICE_ADMIN_URL, client.conf webServiceUrl; "
        f"default {DEFAULT_URL})",
    )
    parser.add_argument(
        "--auth-params",
        default=default(None),
        help="token:<jwt> or file:<path>; sent as a Bearer token (env SLUICE_TOKEN)",
    )
    parser.add_argument("--tls-trust-cert-path", default=default(None), help="CA bundle to trust")
    parser.add_argument(
        "--tls-allow-insecure",
        action="store_true",
        default=default(False),
        help="do not verify the server certificate",
    )
    parser.add_argument(
        "--timeout", type=float, default=default(30.0), help="request timeout, seconds (30)"
    )
    parser.add_argument(
        "--output", choices=FORMATS, default=default("json"), help="json (default), yaml, table"
    )
    parser.add_argument(
        "--columns",
        default=default(None),
        metavar="A,B,...",
        help="table columns to show, comma-separated, or 'all' (with --output table)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The whole command tree."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Administer Sluice tenants, namespaces, topics and dispatch-rate policies.",
        allow_abbrev=False,
    )
    parser.add_argument(
        "--config",
        "--client-config",
        dest="client_config",
        default=None,
        help="client config file (env SLUICE_CLIENT_CONF; default ~/.config/sluice/client.conf)",
    )
    _connection_options(parser, suppress=False)
    trailing = argparse.ArgumentParser(add_help=False)
    _connection_options(trailing, suppress=True)
    commands = parser.add_subparsers(dest="group", metavar="GROUP", title="command groups")
    commands.required = True
    for group in GROUPS:
        group.register(commands, [trailing])
    return parser


def _error(message: str) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    """Run one command; return the process exit code (0 ok, 1 failed, 2 bad usage)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help or a usage error, already printed by argparse
        return exc.code if isinstance(exc.code, int) else 2
    try:
        admin = AdminClient(resolve(args))
    except ConfigError as exc:
        return _error(str(exc))
    try:
        answer = args.handler(args, admin)
    except AdminError as exc:
        return _error(str(exc))
    except KeyboardInterrupt:
        return 130
    finally:
        admin.close()
    if answer is not NO_CONTENT:
        columns = (
            [c.strip() for c in args.columns.split(",") if c.strip()] if args.columns else None
        )
        try:
            text = render(
                answer,
                args.output,
                columns=columns,
                view=getattr(args, "table_view", None),
                width=terminal_width(),
            )
        except OutputError as exc:
            return _error(str(exc))
        print(text)
    # A command may set its own exit status from what it found (``reports run --wait``).
    return getattr(args, "result_code", 0)
