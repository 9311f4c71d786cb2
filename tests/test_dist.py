"""`make dist`: two wheels from this repository.  The client's puts nothing but the ``sluice``
package (and ``sluice-admin``) into site-packages, on light dependencies; the server's holds
the server packages and requires the client.  Built as `make dist` builds them (offline, with
the environment's setuptools)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from tests import ROOT

LIGHT = {"redis", "msgpack", "mmh3", "orjson", "httpx", "pyyaml", "tabulate"}
SERVER_PACKAGES = {"api", "models", "workers", "reports", "server", "dataplane", "migrations"}


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--wheel-dir", str(out), "./client", "."],
        cwd=ROOT, check=True, capture_output=True, text=True,
    )  # fmt: skip
    built = {path.name.split("-")[0]: path for path in out.glob("*.whl")}
    assert set(built) == {"sluice_client", "sluice_dispatch"}, sorted(built)
    return built


def metadata(wheel: Path):
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return Parser().parsestr(archive.read(name).decode())


def top_level(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return {name.split("/")[0] for name in archive.namelist()}


def requirement_names(wheel: Path, extra: bool) -> set[str]:
    names = set()
    for line in metadata(wheel).get_all("Requires-Dist") or []:
        if ("extra ==" in line) == extra:
            names.add(line.split(";")[0].split("[")[0].split(">")[0].split("=")[0].strip())
    return names


def test_the_client_wheel_holds_only_the_sluice_package(wheels):
    client = wheels["sluice_client"]
    assert top_level(client) == {"sluice", "sluice_client-0.1.0.dist-info"}
    with zipfile.ZipFile(client) as archive:
        names = archive.namelist()
        entry_points = archive.read("sluice_client-0.1.0.dist-info/entry_points.txt").decode()
    assert "sluice/protocol/lua/dispatch.lua" in names  # the scripts both sides run
    assert "sluice-admin = sluice.admin_cli:main" in entry_points
    assert requirement_names(client, extra=False) == LIGHT
    # One optional extra: OpenTelemetry's API for the client's traces (sluice.tracing).
    assert requirement_names(client, extra=True) == {"opentelemetry-api"}


def test_installing_the_client_wheel_adds_sluice_and_nothing_else(wheels, tmp_path):
    target = tmp_path / "site-packages"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
         "--target", str(target), str(wheels["sluice_client"])],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    assert {p.name for p in target.iterdir()} == {"sluice", "sluice_client-0.1.0.dist-info", "bin"}
    assert [p.name for p in (target / "bin").iterdir()] == ["sluice-admin"]


def test_the_server_wheel_requires_the_client_and_does_not_carry_it(wheels):
    server = wheels["sluice_dispatch"]
    packages = top_level(server) - {"sluice_dispatch-0.1.0.dist-info"}
    assert packages == SERVER_PACKAGES
    assert metadata(server).get_all("Requires-Dist")[0] == "sluice-client==0.1.0"
    assert requirement_names(server, extra=False) == {"sluice-client"}
    assert {"fastapi", "sqlalchemy", "uvicorn"} <= requirement_names(server, extra=True)
