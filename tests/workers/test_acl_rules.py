"""The ACL rules of ``dataplane.acl`` against the scripts they must allow: every command a
client's script calls is allowed for its action, and the rules name nothing else."""

from __future__ import annotations

import re

import pytest

from dataplane.acl import (
    ACTION_SCRIPTS,
    CONSUME_RULES,
    PRODUCE_RULES,
    Scope,
    grant_selectors,
    render_acl_file,
    session_rules,
)
from sluice.protocol.scripts import SCRIPTS

CALL = re.compile(r"""call\(\s*['"]([A-Za-z]+)['"](?:\s*,\s*['"]([A-Za-z]+)['"])?""")
SUBCOMMANDS = {"XGROUP", "XINFO"}


def _commands(script: str) -> set[str]:
    found = set()
    source = SCRIPTS[script].source
    for name, sub in CALL.findall(source):
        name = name.upper()
        found.add(f"{name}|{sub.upper()}" if name in SUBCOMMANDS and sub else name)
    if "unpack(create)" in source:  # subscribe.lua builds its XGROUP CREATE call
        found.add("XGROUP|CREATE")
    return {c.lower() for c in found}


@pytest.mark.parametrize(
    ("action", "rules"), [("produce", PRODUCE_RULES), ("consume", CONSUME_RULES)]
)
def test_every_command_of_the_actions_scripts_is_allowed(action, rules) -> None:
    allowed = {command for commands, _ in rules for command in commands}
    scripts = [spec.name for spec in ACTION_SCRIPTS[action]]
    used = set().union(*(_commands(s) for s in scripts)) - {"time", "publish"}  # session base
    assert used - allowed == set()


@pytest.mark.parametrize("rules", [PRODUCE_RULES, CONSUME_RULES])
def test_a_level_stream_allows_what_the_log_does(rules) -> None:
    """A partition's priority level streams (``log:<L>``) take what its ``log`` takes."""

    def on(suffix: str) -> set[str]:
        return {c for commands, suffixes in rules if suffix in suffixes for c in commands}

    assert on("log") and on("log") <= on("log:*")


def test_the_levels_hash_is_read_only_for_consumers() -> None:
    produce = " ".join(grant_selectors([(Scope("acme", "orders", "t"), ["produce"])]))
    consume = " ".join(grant_selectors([(Scope("acme", "orders", "t"), ["consume"])]))
    assert "+hset ~sl:{acme/orders/t}:levels" in produce
    assert "%R~sl:{acme/orders/t}:levels" in consume
    assert " ~sl:{acme/orders/t}:levels" not in consume
    assert "~sl:{acme/orders/t}:log:*" in produce and "~sl:{acme/orders/t}:log:*" in consume


def test_a_namespace_scope_names_only_its_namespace() -> None:
    rules = " ".join(grant_selectors([(Scope("acme", "orders"), ["produce"])]))
    assert "sl:{acme/orders/*}:log" in rules
    assert "acme/orders2" not in rules and "sl:{acme/*" not in rules
    topic = " ".join(grant_selectors([(Scope("acme", "orders", "created"), ["consume"])]))
    assert "sl:{acme/orders/created}:log" in topic
    assert "sl:{acme/orders/created-partition-[0-9]*}:log" in topic
    assert "sl:{acme/orders/*" not in topic


def test_a_session_without_grants_has_no_key_and_no_admin_command() -> None:
    rules = session_rules("ab" * 32, [])
    assert rules[:4] == ["reset", "on", "#" + "ab" * 32, "resetchannels"]
    assert not any(r.startswith("(") for r in rules)
    joined = " ".join(rules)
    for forbidden in ("+@all", "+flushall", "+config", "+keys", "+eval ", "+script|load", "~*"):
        assert forbidden not in joined + " "


def test_glob_characters_never_reach_a_pattern() -> None:
    with pytest.raises(ValueError, match="not a valid name"):
        Scope("acme", "or*ders").partition_prefixes()


def test_the_acl_file_switches_the_default_user_off() -> None:
    text = render_acl_file({"api": "a1", "worker": "w1", "reports": "r1"})
    assert text.splitlines()[0].startswith("user default off")
    assert "user sluice-api on >a1" in text and "+acl|setuser" in text
    worker_line = next(line for line in text.splitlines() if "sluice-worker" in line)
    assert "-@dangerous" in worker_line and "+acl" not in worker_line
    with pytest.raises(ValueError, match="without spaces"):
        render_acl_file({"api": "a b", "worker": "w", "reports": "r"})
