"""``python -m sluice.admin_cli`` as a process: exit codes and one-line errors."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests import ROOT
from tests.standalone_process import run_module


def sluice_admin(*args: str, home: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
    env.update(PYTHONPATH=str(ROOT), HOME=str(home))
    return run_module("sluice.admin_cli", *args, cwd=ROOT, env=env)


def test_exit_codes(http, admin_server, tmp_path):
    url = ["--admin-url", admin_server.url]
    created = sluice_admin(*url, "tenants", "create", "acme", home=tmp_path)
    assert (created.returncode, created.stdout, created.stderr) == (0, "", "")
    listed = sluice_admin(*url, "tenants", "list", home=tmp_path)
    assert (listed.returncode, listed.stdout) == (0, '[\n  "acme"\n]\n')
    missing = sluice_admin(*url, "tenants", "get", "nope", home=tmp_path)
    assert missing.returncode == 1
    assert missing.stdout == ""
    assert missing.stderr.startswith("sluice-admin: ") and missing.stderr.count("\n") == 1
    usage = sluice_admin(*url, "tenants", "frobnicate", home=tmp_path)
    assert usage.returncode == 2 and "invalid choice" in usage.stderr
    assert sluice_admin("--help", home=tmp_path).returncode == 0


def test_unreachable_server_is_one_line(tmp_path):
    result = sluice_admin("--admin-url", "http://127.0.0.1:9", "tenants", "list", home=tmp_path)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == "sluice-admin: cannot reach http://127.0.0.1:9: connection refused\n"
