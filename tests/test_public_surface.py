"""The public surface stays as it is unless a change means to move it: the admin API's OpenAPI
document (every path, body, status code and schema), its routes and middlewares, and the help
of every ``sluice-admin`` and ``sluice`` command, flag and argument, compared with the
snapshots in ``tests/golden``.  A change that means to move the surface writes them again:

    SLUICE_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_public_surface.py

and the diff of ``tests/golden`` shows, in review, exactly what users will see change."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest

from api.app import create_app
from models.settings import Settings
from server.cli import build_parser as server_parser
from sluice.admin_cli.runner import build_parser as admin_parser

GOLDEN = Path(__file__).resolve().parent / "golden"


def compare(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("SLUICE_UPDATE_GOLDEN"):
        path.write_text(text)
    expected = path.read_text()
    assert text == expected, f"{name} changed: SLUICE_UPDATE_GOLDEN=1 writes it again"


def api_surface() -> str:
    app = create_app(Settings(authentication_enabled=False, cors_origins=""))
    routes = [
        [getattr(r, "path", ""), sorted(getattr(r, "methods", None) or [])]
        for r in app.router.routes
    ]
    document = {
        "openapi": app.openapi(),
        "routes": routes,
        "middleware": [m.cls.__name__ for m in app.user_middleware],
    }
    return json.dumps(document, sort_keys=True, indent=1) + "\n"


def help_texts(parser: argparse.ArgumentParser, path: list[str]) -> list[str]:
    texts = [f"### {' '.join(path)}", parser.format_help()]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in sorted(action.choices.items()):
                texts += help_texts(sub, [*path, name])
    return texts


@pytest.fixture
def columns(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")  # argparse wraps help to the terminal's width


def test_the_admin_api_is_what_the_snapshot_says():
    compare("openapi.json", api_surface())


def test_every_command_line_is_what_the_snapshot_says(columns):
    texts = help_texts(admin_parser(), ["sluice-admin"]) + help_texts(server_parser(), ["sluice"])
    compare("cli.txt", "\n".join(texts))
