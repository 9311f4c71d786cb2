"""``sluice tokens``: keys and tokens made by the CLI are accepted by a secured admin server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from api.app import create_app
from models.settings import Settings
from server.cli import main
from tests.conftest import ServerThread


def sluice(capsys, *args: str) -> str:
    """Run ``sluice ARGS``; return its standard output (failing on a non-zero exit)."""
    capsys.readouterr()
    assert main(list(args)) == 0
    return capsys.readouterr().out


@pytest.fixture(scope="module")
def secret_key_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("keys") / "secret.key"
    assert main(["tokens", "create-secret-key", "--output", str(path)]) == 0
    return path


@pytest.fixture(scope="module")
def authenticating_server(settings: Settings, secret_key_file: Path) -> Iterator[ServerThread]:
    """Authentication on, authorization off: any valid token may do anything."""
    secure = settings.model_copy(
        update={"authentication_enabled": True, "token_secret_key_file": str(secret_key_file)}
    )
    server = ServerThread(create_app(secure)).start()
    yield server
    server.stop()


def test_secret_key_round_trip(capsys, secret_key_file, authenticating_server, http) -> None:
    assert secret_key_file.stat().st_mode & 0o777 == 0o600
    assert len(secret_key_file.read_bytes()) == 32
    key = f"file:{secret_key_file}"
    token = sluice(
        capsys,
        "tokens",
        "create",
        "--secret-key",
        key,
        "--subject",
        "ci-bot",
        "--expiry-time",
        "1h",
    ).strip()
    shown = json.loads(sluice(capsys, "tokens", "show", token))
    assert shown["header"]["alg"] == "HS256"
    assert shown["claims"]["sub"] == "ci-bot"
    assert 3500 < shown["claims"]["exp"] - __import__("time").time() <= 3600
    checked = json.loads(sluice(capsys, "tokens", "validate", "-sk", key, token))
    assert checked["role"] == "ci-bot"

    with httpx.Client(base_url=authenticating_server.url) as client:
        assert client.get("/admin/v2/tenants").status_code == 401
        bearer = {"Authorization": f"Bearer {token}"}
        # Authorization is off: an authenticated role that is no super-user may do anything.
        assert client.put("/admin/v2/tenants/acme", json={}, headers=bearer).status_code == 204
        assert client.get("/admin/v2/tenants", headers=bearer).json() == ["acme"]
        audit = client.get("/admin/v2/audit", headers=bearer).json()
        assert [(e["entity"], e["role"]) for e in audit] == [("acme", "ci-bot")]


def test_base64_secret_and_key_pair(capsys, tmp_path) -> None:
    encoded = sluice(capsys, "tokens", "create-secret-key", "--base64").strip()
    token = sluice(capsys, "tokens", "create", "-sk", f"data:;base64,{encoded}", "-s", "a")
    (tmp_path / "token").write_text(token)
    assert json.loads(sluice(capsys, "tokens", "show", "-f", str(tmp_path / "token")))[
        "claims"
    ] == {"sub": "a"}

    private, public = tmp_path / "private.pem", tmp_path / "public.pem"
    sluice(
        capsys,
        "tokens",
        "create-key-pair",
        "--output-private-key",
        str(private),
        "--output-public-key",
        str(public),
    )
    assert private.stat().st_mode & 0o777 == 0o600
    assert public.read_bytes().startswith(b"-----BEGIN PUBLIC KEY-----")
    token = sluice(
        capsys, "tokens", "create", "--private-key", f"file:{private}", "--subject", "svc"
    ).strip()
    assert json.loads(sluice(capsys, "tokens", "show", token))["header"]["alg"] == "RS256"
    checked = json.loads(sluice(capsys, "tokens", "validate", "-pk", f"file:{public}", token))
    assert checked["role"] == "svc"


def test_errors_exit_non_zero_with_a_reason(capsys, tmp_path) -> None:
    assert main(["tokens", "validate", "-sk", "data:;base64,YWJj", "x.y.z"]) == 1
    assert capsys.readouterr().err == "error: Malformed token\n"
    assert main(["tokens", "create", "-sk", "abc", "-s", "a", "-e", "3q"]) == 1
    assert "Invalid duration" in capsys.readouterr().err
    assert main(["tokens", "create", "-pk", f"file:{tmp_path}/missing", "-s", "a"]) == 1
    assert "Cannot read key file" in capsys.readouterr().err
