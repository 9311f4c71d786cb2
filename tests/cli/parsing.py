"""What the parser makes of a ``sluice-admin`` command line, checked the same way by every
flag-parity table."""

from __future__ import annotations

import shlex

import pytest

from sluice.admin_cli.runner import build_parser


def assert_parses(line: str, expected: dict) -> None:
    """``line`` parses to a command with a handler and the ``expected`` argument values."""
    args = vars(build_parser().parse_args(shlex.split(line)))
    assert callable(args["handler"])
    for key, value in expected.items():
        assert args[key] == value, key


def assert_usage_error(line: str) -> None:
    """``line`` is refused as a usage error (exit status 2)."""
    with pytest.raises(SystemExit) as raised:
        build_parser().parse_args(shlex.split(line))
    assert raised.value.code == 2


def parsing_test(cases: list[tuple[str, dict]]):
    """A test, one case per ``(line, expected)`` of ``cases``, that the line parses so."""

    @pytest.mark.parametrize(("line", "expected"), cases, ids=[c[0][:60] for c in cases])
    def test(line: str, expected: dict) -> None:
        assert_parses(line, expected)

    return test


def usage_error_test(lines: list[str]):
    """A test, one case per line of ``lines``, that the line is a usage error."""

    @pytest.mark.parametrize("line", lines)
    def test(line: str) -> None:
        assert_usage_error(line)

    return test
