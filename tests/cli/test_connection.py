"""Connection settings (flags, environment, client.conf), auth tokens, TLS, timeouts, output."""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from sluice.admin_cli import main
from sluice.admin_cli.config import DEFAULT_URL, resolve


class Recorder(BaseHTTPRequestHandler):
    """Answers every GET with ``["ok"]`` after ``delay`` seconds, remembering the headers."""

    seen: list[dict] = []
    delay = 0.0

    def do_GET(self) -> None:
        Recorder.seen.append(dict(self.headers))
        time.sleep(Recorder.delay)
        body = json.dumps(["ok"]).encode()
        try:
            self.send_response(200)
        except OSError:
            return
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        try:
            self.end_headers()
            self.wfile.write(body)
        except OSError:  # the client gave up (the timeout test)
            pass

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[str]:
    """A small real HTTP server that records request headers; yields its URL."""
    Recorder.seen = []
    Recorder.delay = 0.0
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_url_from_client_conf_env_and_flag(http, admin_server, tmp_path, monkeypatch, capsys):
    conf = tmp_path / "client.conf"
    conf.write_text(f"# Sluice client\nwebServiceUrl={admin_server.url}\nunused = x\n")
    assert run(capsys, "--config", str(conf), "tenants", "list") == (0, "[]\n", "")
    monkeypatch.setenv("SLUICE_CLIENT_CONF", str(conf))
    assert run(capsys, "tenants", "list")[0] == 0
    # the environment beats the file, the flag beats both
    monkeypatch.setenv("SLUICE_ADMIN_URL", "http://127.0.0.1:9")
    assert run(capsys, "tenants", "list")[0] == 1
    assert run(capsys, "--admin-url", admin_server.url, "tenants", "list")[0] == 0


def test_default_client_conf_in_home(http, admin_server, tmp_path, capsys):
    folder = tmp_path / "home" / ".config" / "sluice"
    folder.mkdir(parents=True)
    (folder / "client.conf").write_text(f"webServiceUrl={admin_server.url}\n")
    assert run(capsys, "tenants", "list") == (0, "[]\n", "")


def test_missing_explicit_client_conf(tmp_path, capsys):
    code, out, err = run(capsys, "--config", str(tmp_path / "nope.conf"), "tenants", "list")
    assert code == 1 and out == ""
    assert "client config file not found" in err


def test_no_settings_means_localhost():
    args = argparse.Namespace(
        client_config=None,
        admin_url=None,
        auth_params=None,
        tls_trust_cert_path=None,
        tls_allow_insecure=False,
        timeout=30.0,
    )
    connection = resolve(args, env={"HOME": "/nonexistent"})
    assert connection.url == DEFAULT_URL
    assert connection.token is None and connection.verify is True
    args.tls_trust_cert_path = "/etc/ca.pem"
    assert resolve(args, env={}).verify == "/etc/ca.pem"
    args.tls_allow_insecure = True
    assert resolve(args, env={}).verify is False


def test_tls_settings_from_client_conf(tmp_path):
    conf = tmp_path / "client.conf"
    conf.write_text("webServiceUrl=https://admin:8443/\ntlsTrustCertsFilePath=/ca.pem\n")
    args = argparse.Namespace(
        client_config=str(conf),
        admin_url=None,
        auth_params=None,
        tls_trust_cert_path=None,
        tls_allow_insecure=False,
        timeout=5.0,
    )
    connection = resolve(args, env={})
    assert (connection.url, connection.verify) == ("https://admin:8443", "/ca.pem")
    conf.write_text("tlsAllowInsecureConnection=true\n")
    assert resolve(args, env={}).verify is False


def test_bearer_token_sources(recorder, tmp_path, monkeypatch, capsys):
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    conf = tmp_path / "client.conf"
    conf.write_text(f"webServiceUrl={recorder}\nauthParams=token:from-conf\n")
    runs = [
        ("--admin-url", recorder, "--auth-params", "token:abc.def.ghi", "tenants", "list"),
        ("--admin-url", recorder, "--auth-params", f"file:{token_file}", "tenants", "list"),
        ("--admin-url", recorder, "tenants", "list", "--auth-params", f"file://{token_file}"),
        ("--config", str(conf), "tenants", "list"),
    ]
    for args in runs:
        assert run(capsys, *args)[0] == 0
    monkeypatch.setenv("SLUICE_TOKEN", "from-env")
    assert run(capsys, "--admin-url", recorder, "tenants", "list")[0] == 0
    tokens = [headers.get("Authorization") for headers in Recorder.seen]
    assert tokens == [
        "Bearer abc.def.ghi",
        "Bearer from-file",
        "Bearer from-file",
        "Bearer from-conf",
        "Bearer from-env",
    ]


def test_unreadable_token_file(tmp_path, capsys):
    code, _, err = run(capsys, "--auth-params", f"file:{tmp_path}/none", "tenants", "list")
    assert code == 1 and "cannot read token file" in err


def test_timeout(recorder, capsys):
    Recorder.delay = 1.0
    code, out, err = run(capsys, "--admin-url", recorder, "--timeout", "0.2", "tenants", "list")
    assert code == 1 and out == ""
    assert err.strip() == f"sluice-admin: timed out after 0.2 s waiting for {recorder}"


def test_unreachable_server(capsys):
    code, out, err = run(capsys, "--admin-url", "http://127.0.0.1:9", "tenants", "list")
    assert (code, out) == (1, "")
    assert err == "sluice-admin: cannot reach http://127.0.0.1:9: connection refused\n"


def test_output_formats(ok, namespace):
    assert yaml.safe_load(ok("--output", "yaml", "tenants", "get", "acme").out) == {
        "adminRoles": [],
        "allowedClusters": ["standalone"],
    }
    ok("namespaces", "create", "acme/billing")
    assert ok("namespaces", "list", "acme", "--output", "table").out.split() == [
        "acme/billing",
        "acme/orders",
    ]
    assert ok("namespaces", "get-dispatch-rate", namespace, "--output", "table").out == (
        "(not set)\n"
    )
    ok("namespaces", "set-dispatch-rate", namespace, "-md", "9")
    rows = ok("namespaces", "get-dispatch-rate", namespace, "--output", "table").out.splitlines()
    assert rows[0].split() == ["KEY", "VALUE"]
    assert "dispatchThrottlingRateInMsg 9" in [" ".join(r.split()) for r in rows]
    assert ok("tenants", "list", "--output", "json").out == '[\n  "acme"\n]\n'
