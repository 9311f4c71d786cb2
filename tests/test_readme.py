"""The README's Quick start, run as written, in order, against a real standalone.

Every ``sh`` and ``python`` block of the Quick start (and the ``sluice-admin`` section's) is
extracted and run: shell blocks with bash (``set -e``), Python blocks with this interpreter.
The ``make`` lines are what starts this very suite (``make test``) or the standalone, so they
are checked as targets (``make -n``) and the standalone is started directly, with
``--no-reports`` (``tests/test_standalone.py`` covers the report scheduler). The one change to
the text: ``localhost:8080`` and ``localhost:6650`` become this standalone's free ports, and
``SLUICE_ADMIN_URL`` points ``sluice-admin`` at it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests import ROOT
from tests.standalone_process import Standalone

README = ROOT / "README.md"
BLOCK = re.compile(r"^```(sh|python)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def section(title: str) -> str:
    """The text of a ``## `` section, up to the next ``## `` heading."""
    text = README.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def blocks(title: str) -> list[tuple[str, str]]:
    """The ``(language, code)`` blocks of a section, in order."""
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(section(title))]


def test_the_quick_start_has_the_two_commands_and_states_the_prerequisites():
    quick = section("Quick start")
    commands = [code.strip() for lang, code in blocks("Quick start") if lang == "sh"]
    assert "make standalone" in commands and "make test" in commands
    prerequisites = [line for line in quick.splitlines() if line.startswith("You need ")]
    assert len(prerequisites) == 1 and "python3" in prerequisites[0]
    for port in ("8080", "6650", "8081"):
        assert f"| {port} |" in quick
    assert "per partition" in quick and "### Troubleshooting" in quick


def test_the_troubleshooting_lines_are_what_sluice_prints():
    quick = section("Quick start")
    busy = (
        "sluice: port 8080 (admin API) is already in use: stop what listens there, "
        "or choose another port with --port"
    )
    assert f"`{busy}`" in quick
    script = (ROOT / "scripts" / "install-system-packages.sh").read_text()
    assert "`install-system-packages: not root and sudo is not installed: as root, run" in quick
    assert '"not root and sudo is not installed: as root, run"' in script
    assert "`install-system-packages: Sluice needs Python 3.11 or newer, and python3 is" in quick
    assert '"Sluice needs Python 3.11 or newer, and $PYTHON is' in script


@pytest.fixture
def standalone(tmp_path):
    server = Standalone(tmp_path, "--no-reports").start()
    yield server
    assert server.interrupt() == 0


def as_here(code: str, server: Standalone) -> str:
    return code.replace("localhost:8080", f"127.0.0.1:{server.port}").replace(
        "localhost:6650", f"127.0.0.1:{server.redis_port}"
    )


def run_block(lang: str, code: str, server: Standalone, tmp_path: Path) -> str:
    env = dict(os.environ)
    env["SLUICE_ADMIN_URL"] = server.url
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    if lang == "python":
        command = [sys.executable, "-"]
        stdin = as_here(code, server)
    else:
        lines = []
        for line in code.splitlines():
            if line.startswith("make "):
                target = line.split("#")[0].split()[1]
                make = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True)
                assert make.returncode == 0, f"make {target}: {make.stderr.decode()}"
                continue
            if line.startswith("source .venv/bin/activate") and not (ROOT / ".venv").is_dir():
                continue  # the suite runs from another environment: its bin is on PATH
            lines.append(line)
        command = ["bash", "-e", "-o", "pipefail", "-s"]
        stdin = as_here("\n".join(lines), server)
    done = subprocess.run(
        command, input=stdin, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"{lang} block failed:\n{code}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_the_quick_start_runs_as_written(standalone, tmp_path):
    outputs = [run_block(lang, code, standalone, tmp_path) for lang, code in blocks("Quick start")]
    text = "\n".join(outputs)
    # The curl session: the namespace rate applies to the topic.
    assert '"dispatchThrottlingRateInMsg":1000' in text.replace(" ", "")
    # The Python client, on its first run: the message arrives.
    assert "b'hello' {'k': 'v'}" in text
    # sluice-admin, reachable as written, prints real tables.
    assert "Limits apply per partition" in text
    rows = [" ".join(line.split()) for line in text.splitlines()]
    assert "topic 1000 msg/s (namespace level, topic limiter) no limit" in rows
    assert "topic 4 \N{MULTIPLICATION SIGN} 1,000 msg/s = 4,000 msg/s" in text  # the footer
    assert any(row.startswith("rate in ") and "msg/s" in row for row in rows)  # the stats
    # And the API reference the Quick start points at works.
    for page in ("/docs", "/redoc"):
        assert httpx.get(f"{standalone.url}{page}").status_code == 200
    # The sluice-admin section goes on from there.
    for lang, code in blocks("sluice-admin"):
        run_block(lang, code, standalone, tmp_path)
