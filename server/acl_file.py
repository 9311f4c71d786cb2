"""``sluice redis-acl-file``: write the Redis ACL file of a secured data plane.

sluice redis-acl-file [--output PATH] [--api-password-file F] [--worker-password-file F]
                      [--reports-password-file F]

The file (``dataplane.acl.render_acl_file``) switches the ``default`` user off and declares the
three service users, ``sluice-api``, ``sluice-worker`` and ``sluice-reports``; load it with
``redis-server --aclfile PATH`` (or ``ACL LOAD``).  Each password comes from its file when the
flag is given, else from the environment: ``SLUICE_REDIS_API_PASSWORD``,
``SLUICE_REDIS_WORKER_PASSWORD``, ``SLUICE_REDIS_REPORTS_PASSWORD``.  A missing or empty
password is refused (exit 1) rather than written as a user without one.  The file holds the
passwords in clear, so it is written readable by its owner only (mode 0600).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from dataplane.acl import SERVICE_USERS, render_acl_file

# service -> the environment variable that holds its password
PASSWORD_VARIABLES = {
    service: f"SLUICE_REDIS_{service.upper()}_PASSWORD" for service in SERVICE_USERS
}


class MissingPassword(ValueError):
    """A service user's password was given nowhere (or is empty)."""


def read_passwords(
    files: Mapping[str, str | None], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """service -> password, from ``files`` (service -> path or None) or else the environment.

    A password file's trailing newline is not part of the password."""
    if environ is None:
        environ = os.environ
    passwords: dict[str, str] = {}
    missing: list[str] = []
    for service, variable in PASSWORD_VARIABLES.items():
        path = files.get(service)
        secret = Path(path).read_text().rstrip("\r\n") if path else environ.get(variable, "")
        if not secret:
            flag = f"--{service}-password-file"
            missing.append(f"{SERVICE_USERS[service]} ({variable} or {flag})")
        passwords[service] = secret
    if missing:
        raise MissingPassword("no password for " + ", ".join(missing))
    return passwords


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` with mode 0600, whatever the umask or the file's old mode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        os.fchmod(handle.fileno(), 0o600)
        handle.write(text)


def run(args: argparse.Namespace, _settings: object = None) -> int:
    """Write the ACL file; a missing password or an unusable one prints why and exits 1."""
    files = {service: getattr(args, f"{service}_password_file") for service in SERVICE_USERS}
    try:
        text = render_acl_file(read_passwords(files))
        if args.output:
            write_private(Path(args.output), text)
        else:
            sys.stdout.write(text)
            sys.stdout.flush()
    except (MissingPassword, ValueError, OSError) as exc:
        print(f"sluice redis-acl-file: {exc}", file=sys.stderr)
        return 1
    return 0


def add_acl_file_parser(
    commands: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]
) -> None:
    """Add ``redis-acl-file`` to the ``sluice`` parser."""
    parser = commands.add_parser(
        "redis-acl-file",
        parents=parents,
        help="write the Redis ACL file of a secured data plane (service users, default off)",
        description=(__doc__ or "").split("\n\n", 2)[2],
    )
    parser.add_argument("-o", "--output", help="write to this file, mode 0600 (default stdout)")
    for service, variable in PASSWORD_VARIABLES.items():
        parser.add_argument(
            f"--{service}-password-file",
            metavar="FILE",
            help=f"the {SERVICE_USERS[service]} password (default: env {variable})",
        )
    parser.set_defaults(func=run)
