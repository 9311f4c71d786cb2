"""scripts/install-system-packages.sh: what it says when it cannot help (nothing is installed).

The happy path (apt-get installing the packages) is what every new machine's first
``make`` runs; here, the two messages the README's Troubleshooting quotes.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import ROOT

SCRIPT = ROOT / "scripts" / "install-system-packages.sh"


@pytest.fixture
def folder() -> Iterator[Path]:
    """A folder any user may read (the unprivileged run below uses it)."""
    path = Path(tempfile.mkdtemp(prefix="sluice-install-"))
    path.chmod(0o755)
    shutil.copy(SCRIPT, path / "install.sh")
    (path / "bin").mkdir()
    yield path
    shutil.rmtree(path)


def link_tools(bin_dir: Path, names: list[str]) -> None:
    for name in names:
        found = shutil.which(name)
        if found:
            (bin_dir / name).symlink_to(found)


def run(folder: Path, env: dict[str, str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(folder / "install.sh")],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        **kwargs,
    )


def test_an_old_python_is_one_clear_line(folder: Path):
    stub = folder / "bin" / "python3"
    stub.write_text('#!/bin/sh\n[ "$1" = -V ] && echo "Python 3.9.2"\nexit 1\n')
    stub.chmod(0o755)
    env = {"PATH": f"{folder / 'bin'}:{os.environ['PATH']}", "PYTHON": "python3"}
    done = run(folder, env)
    assert done.returncode == 1
    assert done.stderr == (
        "install-system-packages: Sluice needs Python 3.11 or newer, and python3 is 3.9.2 "
        "(install one, then: make PYTHON=python3.11 ...)\n"
    )
    assert done.stdout == ""


@pytest.mark.skipif(shutil.which("apt-get") is None, reason="a machine without apt-get")
def test_without_root_and_sudo_it_says_what_to_install(folder: Path):
    bin_dir = folder / "bin"
    # Everything the script uses, except jq (so something is missing) and sudo.
    tools = ["bash", "id", "cut", "head", "ls", "apt-get", "redis-server", "java", "curl"]
    link_tools(bin_dir, tools)
    # The system's Python: an unprivileged user may not reach this virtual environment's.
    system_python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
    (bin_dir / "python3").symlink_to(system_python)
    env = {"PATH": str(bin_dir), "PYTHON": "python3", "HOME": str(folder)}
    user = {}
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        user = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
    done = run(folder, env, **user)
    assert done.returncode == 1
    assert done.stderr.startswith(
        "install-system-packages: not root and sudo is not installed: as root, run "
        "'apt-get install "
    )
    assert done.stderr.endswith("', then run make again\n")
    assert " jq" in done.stderr
    assert done.stdout == ""


def test_with_everything_there_it_prints_nothing():
    tools = ("redis-server", "java", "curl", "jq", "chromium", "node", "npm", "prometheus")
    if not all(shutil.which(tool) for tool in tools):
        pytest.skip("this machine lacks some of the packages")
    done = subprocess.run(
        ["bash", str(SCRIPT)],
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=60,
    )
    if "installing" in done.stdout:
        pytest.skip("this machine lacks some of the packages")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
