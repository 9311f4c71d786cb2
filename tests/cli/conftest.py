"""Fixtures for ``sluice-admin``: run it in-process against the real admin server.

The environment is cleared of every ``SLUICE_*`` client setting and ``HOME`` points at an
empty folder, so no client config file of the machine running the tests is read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from sluice.admin_cli import main


@dataclass
class Result:
    """Exit code and captured output of one run."""

    code: int
    out: str
    err: str

    @property
    def json(self):
        """stdout decoded as JSON."""
        return json.loads(self.out)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    """No client settings from the environment or the home folder."""
    for name in ("SLUICE_ADMIN_URL", "SLUICE_CLIENT_CONF", "SLUICE_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


@pytest.fixture
def cli(http, admin_server, capsys):
    """``cli("tenants", "list")`` runs sluice-admin against a freshly emptied server."""

    def run(*args: str, url: str | None = None) -> Result:
        capsys.readouterr()
        code = main(["--admin-url", url or admin_server.url, *args])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


@pytest.fixture
def ok(cli):
    """Like ``cli`` but asserts success."""

    def run(*args: str) -> Result:
        result = cli(*args)
        assert result.code == 0, result.err
        assert result.err == ""
        return result

    return run


@pytest.fixture
def namespace(ok):
    """Tenant ``acme`` with namespace ``acme/orders``."""
    ok("tenants", "create", "acme", "--allowed-clusters", "standalone")
    ok("namespaces", "create", "acme/orders")
    return "acme/orders"


@pytest.fixture
def topic(ok, namespace):
    """Partitioned topic ``persistent://acme/orders/created`` (2 partitions) with sub ``s1``."""
    name = "persistent://acme/orders/created"
    ok("topics", "create-partitioned-topic", name, "-p", "2")
    ok("topics", "create-subscription", name, "-s", "s1")
    return name


def applied_from_namespace(ok, group: str, topic: str, namespace_set: tuple, topic_get: str):
    """Set a policy on namespace ``acme/orders`` (``namespace_set``: the verb and its flags);
    the topic (``group topic_get``) has no value of its own; the value it applies."""
    ok("namespaces", namespace_set[0], "acme/orders", *namespace_set[1:])
    assert ok(group, topic_get, topic).out.strip() == "null"
    return ok(group, topic_get, topic, "-ap").json
