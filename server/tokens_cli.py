"""``sluice tokens``: make keys and tokens for authentication, like ``pulsar tokens``.

sluice tokens create-secret-key [--output FILE] [--base64]
sluice tokens create-key-pair --output-private-key F --output-public-key F
sluice tokens create (--secret-key KEY | --private-key KEY) --subject ROLE [--expiry-time 1d]
sluice tokens show (TOKEN | -f FILE | -i)
sluice tokens validate (--secret-key KEY | --public-key KEY) (TOKEN | -f FILE | -i)

KEY is ``file:PATH``, ``data:;base64,XXXX`` or the key itself, as in Pulsar.  Keys are written
in PEM (public and private) or as raw bytes (secret); private files are made readable by the
owner only.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
from pathlib import Path

from models.errors import SluiceError
from models.tokens import (
    TokenVerifier,
    create_key_pair,
    create_secret_key,
    create_token,
    parse_duration,
    read_key,
    show_token,
)


def _write(path: str, data: bytes, *, private: bool) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _create_secret_key(args: argparse.Namespace) -> None:
    key = create_secret_key(args.algorithm)
    if args.base64:
        key = base64.b64encode(key)
    if args.output:
        _write(args.output, key, private=True)
    else:
        sys.stdout.buffer.write(key + (b"\n" if args.base64 else b""))
        sys.stdout.flush()


def _create_key_pair(args: argparse.Namespace) -> None:
    private, public = create_key_pair(args.algorithm)
    _write(args.output_private_key, private, private=True)
    _write(args.output_public_key, public, private=False)


def _create(args: argparse.Namespace) -> None:
    token = create_token(
        subject=args.subject,
        secret_key=read_key(args.secret_key) if args.secret_key else None,
        private_key=read_key(args.private_key) if args.private_key else None,
        algorithm=args.signature_algorithm,
        expires_in=parse_duration(args.expiry_time) if args.expiry_time else None,
        headers=dict(args.headers) if args.headers else None,
    )
    print(token)


def _token_of(args: argparse.Namespace) -> str:
    if args.stdin:
        token = sys.stdin.read()
    elif args.token_file:
        token = Path(args.token_file).read_text()
    else:
        token = args.token or ""
    if not token.strip():
        raise SystemExit("give a token: TOKEN, -f FILE or -i (standard input)")
    return token.strip()


def _show(args: argparse.Namespace) -> None:
    header, claims = show_token(_token_of(args))
    print(json.dumps({"header": header, "claims": claims}, indent=2))


def _validate(args: argparse.Namespace) -> None:
    verifier = TokenVerifier.from_keys(
        secret_key=read_key(args.secret_key) if args.secret_key else None,
        public_key=read_key(args.public_key) if args.public_key else None,
    )
    token = _token_of(args)
    role = verifier.role(token)
    print(json.dumps({"valid": True, "role": role, "claims": show_token(token)[1]}, indent=2))


def _header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected name=value, got {text!r}")
    return name, value


def _token_source(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("token", nargs="?", help="the token")
    parser.add_argument("-i", "--stdin", action="store_true", help="read the token from stdin")
    parser.add_argument("-f", "--token-file", help="read the token from a file")


def add_tokens_parser(commands: argparse._SubParsersAction) -> None:
    """Add ``tokens`` and its sub-commands to the ``sluice`` parser."""
    tokens = commands.add_parser("tokens", help="create keys and authentication tokens")
    tokens.set_defaults(func=run)
    actions = tokens.add_subparsers(dest="tokens_command", required=True)

    secret = actions.add_parser("create-secret-key", help="a random secret key (HS256)")
    secret.add_argument("-a", "--algorithm", default="HS256", help="HS256, HS384 or HS512")
    secret.add_argument("-o", "--output", help="write to this file (default stdout)")
    secret.add_argument("-b", "--base64", action="store_true", help="base64-encode the key")
    secret.set_defaults(action=_create_secret_key)

    pair = actions.add_parser("create-key-pair", help="a private/public key pair (RS256)")
    pair.add_argument("-a", "--algorithm", default="RS256", help="RS256/384/512, ES256/384/512")
    pair.add_argument("--output-private-key", required=True, help="file for the private key")
    pair.add_argument("--output-public-key", required=True, help="file for the public key")
    pair.set_defaults(action=_create_key_pair)

    create = actions.add_parser("create", help="a token for a role")
    keys = create.add_mutually_exclusive_group(required=True)
    keys.add_argument("-sk", "--secret-key", help="sign with this secret key")
    keys.add_argument("-pk", "--private-key", help="sign with this private key")
    create.add_argument("-s", "--subject", required=True, help="the role the token stands for")
    create.add_argument("-e", "--expiry-time", help="lifetime, e.g. 30m, 12h, 1d, 1y")
    create.add_argument("-a", "--signature-algorithm", help="default HS256 or the key's kind")
    create.add_argument(
        "--headers", type=_header, action="append", metavar="NAME=VALUE", help="extra header"
    )
    create.set_defaults(action=_create)

    show = actions.add_parser("show", help="print a token's header and claims (unverified)")
    _token_source(show)
    show.set_defaults(action=_show)

    validate = actions.add_parser("validate", help="check a token's signature and expiry")
    verify_keys = validate.add_mutually_exclusive_group(required=True)
    verify_keys.add_argument("-sk", "--secret-key", help="the secret key")
    verify_keys.add_argument("-pk", "--public-key", help="the public key")
    _token_source(validate)
    validate.set_defaults(action=_validate)


def run(args: argparse.Namespace, _settings: object = None) -> int:
    """Run the chosen ``tokens`` sub-command; errors print their reason and exit 1."""
    try:
        args.action(args)
    except SluiceError as exc:
        print(f"error: {exc.reason}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0
