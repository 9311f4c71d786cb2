"""Product functions stay short enough to read: none over 80 lines (docstring included;
migrations aside, which are written once and never edited)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests import ROOT

PRODUCT = ("api", "models", "workers", "dataplane", "server", "reports", "sluice")
LIMIT = 80


def long_functions(limit: int = LIMIT) -> list[str]:
    found = []
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    length = (node.end_lineno or node.lineno) - node.lineno + 1
                    if length > limit:
                        where = path.relative_to(ROOT)
                        found.append(f"{where}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_the_check_finds_a_long_function():
    assert long_functions(limit=20), "some product function is longer than 20 lines"


def test_no_product_function_is_longer_than_80_lines():
    assert long_functions() == []


def test_every_file_the_suite_runs_first_exists():
    """``tests/conftest.py``'s ``SLOW_FIRST`` names files that are there (a renamed one would
    quietly go back to the end of the run)."""
    from tests.conftest import SLOW_FIRST

    root = Path(__file__).resolve().parents[1]
    assert [name for name in SLOW_FIRST if not (root / name).is_file()] == []
