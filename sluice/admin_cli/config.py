"""Connection settings: command-line flags, then environment, then the client config file.

The client config file is a Pulsar ``client.conf``-style ``key=value`` file (``#`` starts a
comment).  Keys read: ``webServiceUrl``, ``authParams``, ``tlsTrustCertsFilePath``,
``tlsAllowInsecureConnection``.  Its path comes from ``--config``, else ``SLUICE_CLIENT_CONF``,
else ``~/.config/sluice/client.conf`` (a missing default file is fine).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_URL = "http://localhost:8080"
DEFAULT_CONF = "~/.config/sluice/client.conf"
TRUE_WORDS = frozenset({"true", "1", "yes", "on"})


class ConfigError(Exception):
    """A setting that cannot be used (unreadable file, bad auth parameters)."""


@dataclass(frozen=True, slots=True)
class Connection:
    """Everything the HTTP client needs to reach the admin service."""

    url: str
    token: str | None
    verify: bool | str
    timeout: float


def read_client_conf(path: str | None, env: dict[str, str]) -> dict[str, str]:
    """The key/value pairs of the client config file ({} when the default one is absent)."""
    explicit = path or env.get("SLUICE_CLIENT_CONF")
    file = Path(os.path.expanduser(explicit or DEFAULT_CONF))
    if not file.is_file():
        if explicit:
            raise ConfigError(f"client config file not found: {file}")
        return {}
    values: dict[str, str] = {}
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read client config file {file}: {exc.strerror}") from None
    for line in lines:
        line = line.strip()
        if not line or line.startswith(("#", "!")) or "=" not in line:
            continue
        key, value = line.split("=", 1)
        values[key.strip()] = value.strip()
    return values


def token_from_auth_params(params: str) -> str:
    """``token:<jwt>``, ``file:<path>`` (also ``file:///path``) or a bare token."""
    params = params.strip()
    if params.startswith("token:"):
        token = params[len("token:") :].strip()
    elif params.startswith("file:"):
        path = params[len("file:") :]
        if path.startswith("//"):
            path = path[2:]
        try:
            token = Path(os.path.expanduser(path)).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(f"cannot read token file {path}: {exc.strerror}") from None
    else:
        token = params
    if not token:
        raise ConfigError("empty token in --auth-params")
    return token


def resolve(args, env: dict[str, str] | None = None) -> Connection:
    """Merge flags (highest), environment and the client config file (lowest)."""
    env = dict(os.environ) if env is None else env
    conf = read_client_conf(args.client_config, env)
    url = args.admin_url or env.get("SLUICE_ADMIN_URL") or conf.get("webServiceUrl") or DEFAULT_URL
    auth = args.auth_params or conf.get("authParams")
    token = token_from_auth_params(auth) if auth else (env.get("SLUICE_TOKEN") or None)
    insecure = args.tls_allow_insecure or (
        conf.get("tlsAllowInsecureConnection", "").lower() in TRUE_WORDS
    )
    trust = args.tls_trust_cert_path or conf.get("tlsTrustCertsFilePath") or None
    verify: bool | str = False if insecure else (trust or True)
    return Connection(url.rstrip("/"), token, verify, args.timeout)
