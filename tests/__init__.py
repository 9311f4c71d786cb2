"""The test suite.  ``ROOT``: the repository's folder, for the tests that run its files."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
