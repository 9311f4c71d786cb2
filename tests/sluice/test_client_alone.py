"""The client stands alone: ``import sluice`` loads none of the server's libraries, and the
wire protocol's old module paths are the very same objects (so both sides agree)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests import ROOT

SERVER_LIBRARIES = (
    "fastapi",
    "starlette",
    "sqlalchemy",
    "celery",
    "pyspark",
    "alembic",
    "uvicorn",
    "pydantic",
    "pydantic_settings",
    "psycopg",
    "prometheus_client",
)
SERVER_PACKAGES = ("api", "workers", "models", "reports", "migrations", "server")


def loaded_after(code: str) -> set[str]:
    """Top-level names of the modules a fresh interpreter holds after running ``code``."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return {name.partition(".")[0] for name in json.loads(done.stdout.splitlines()[-1])}


def test_import_sluice_loads_no_server_library():
    loaded = loaded_after(
        "import sluice, sluice.producer, sluice.consumer, sluice.protocol.frames\n"
        "sluice.Client  # the public names resolve"
    )
    assert "sluice" in loaded and "redis" in loaded
    assert loaded.isdisjoint(SERVER_LIBRARIES), sorted(loaded & set(SERVER_LIBRARIES))
    assert loaded.isdisjoint(SERVER_PACKAGES), sorted(loaded & set(SERVER_PACKAGES))


def test_the_admin_cli_loads_no_server_library():
    loaded = loaded_after("import sluice.admin_cli.runner")
    assert loaded.isdisjoint(SERVER_LIBRARIES), sorted(loaded & set(SERVER_LIBRARIES))
    assert loaded.isdisjoint(SERVER_PACKAGES), sorted(loaded & set(SERVER_PACKAGES))


def test_server_errors_are_the_protocol_errors():
    import models.errors
    from sluice.protocol import errors

    assert models.errors.PreconditionFailed is errors.PreconditionFailed


def test_every_script_ships_with_the_protocol():
    from sluice.protocol.scripts import SCRIPTS

    for name, spec in SCRIPTS.items():
        assert "redis.call" in spec.source, name
