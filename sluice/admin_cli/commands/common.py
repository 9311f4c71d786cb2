"""Pieces shared by the command groups: rate flags, ``--dry-run``, parser helpers.

Every handler has the signature ``handler(args, admin) -> answer``; the runner prints the
answer (nothing for a ``204``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from sluice.admin_cli.client import AdminClient

Handler = Callable[[argparse.Namespace, AdminClient], Any]


def add_command(
    group: argparse._SubParsersAction, name: str, help_text: str, handler: Handler, parents=()
) -> argparse.ArgumentParser:
    """A leaf command bound to ``handler``; ``parents`` carries the trailing global options."""
    parser = group.add_parser(
        name, help=help_text, description=help_text, parents=list(parents), allow_abbrev=False
    )
    parser.set_defaults(handler=handler)
    return parser


def add_group(
    commands: argparse._SubParsersAction, name: str, help_text: str
) -> argparse._SubParsersAction:
    """A command group such as ``tenants``; a command inside it is required."""
    parser = commands.add_parser(name, help=help_text, description=help_text, allow_abbrev=False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    sub.required = True
    return sub


def add_rate_flags(parser: argparse.ArgumentParser, relative: bool = True) -> None:
    """``-md``, ``-bd``, ``-dt`` and ``-rp`` with pulsar-admin's defaults."""
    parser.add_argument(
        "-md",
        "--msg-dispatch-rate",
        type=int,
        default=-1,
        help="messages per period; <= 0 means no limit (default -1)",
    )
    parser.add_argument(
        "-bd",
        "--byte-dispatch-rate",
        type=int,
        default=-1,
        help="bytes per period; <= 0 means no limit (default -1)",
    )
    parser.add_argument(
        "-dt",
        "--dispatch-rate-period",
        type=int,
        default=1,
        help="period in seconds (default 1)",
    )
    if relative:
        add_switch(
            parser,
            "-rp",
            "--relative-to-publish-rate",
            "the limit is the publish rate plus the given value",
        )


def add_switch(parser: argparse.ArgumentParser, *flags_and_help: str, dest: str = "") -> None:
    """A flag that is off unless given: the flag names, then the help text."""
    *flags, help_text = flags_and_help
    parser.add_argument(*flags, action="store_true", help=help_text, dest=dest or None)


def rate_body(args: argparse.Namespace) -> dict:
    """The DispatchRate JSON body of the rate flags."""
    return {
        "dispatchThrottlingRateInMsg": args.msg_dispatch_rate,
        "dispatchThrottlingRateInByte": args.byte_dispatch_rate,
        "ratePeriodInSecond": args.dispatch_rate_period,
        "relativeToPublishRate": bool(getattr(args, "relative_to_publish_rate", False)),
    }


def add_dry_run(parser: argparse.ArgumentParser) -> None:
    """``--dry-run``: validate on the server, print what would apply, change nothing."""
    add_switch(parser, "--dry-run", "change nothing; print the limits the change would produce")


def dry_run_params(args: argparse.Namespace) -> dict:
    """``{"dryRun": true}`` when ``--dry-run`` was given."""
    return {"dryRun": True} if args.dry_run else {}


def add_applied(parser: argparse.ArgumentParser) -> None:
    """``-ap/--applied`` on a policy ``get``: the value in force, resolved through the levels."""
    add_switch(
        parser,
        "-ap",
        "--applied",
        "the value in force, resolved through namespace and broker levels",
    )


def add_global(parser: argparse.ArgumentParser) -> None:
    """pulsar-admin's ``-g/--global`` on topic policies (one cluster: same as local)."""
    add_switch(
        parser,
        "-g",
        "--global",
        "the global policy (Sluice has one cluster: same as local)",
        dest="global_policy",
    )


def add_force(parser: argparse.ArgumentParser, help_text: str) -> None:
    """``-f/--force``."""
    add_switch(parser, "-f", "--force", help_text)


def csv_list(value: str) -> list[str]:
    """A comma-separated flag value as a list of non-empty items."""
    return [item.strip() for item in value.split(",") if item.strip()]
