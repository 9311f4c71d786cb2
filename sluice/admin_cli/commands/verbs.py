"""The ``set-X``, ``get-X`` and ``remove-X`` commands of one policy, declared once.

Every policy the CLI sets (dispatch rates, abuse limits, publish and subscribe rates) has the
same three commands, as in ``pulsar-admin``: ``set-X TARGET FLAGS`` posts a body, ``get-X
TARGET`` reads it (with ``-ap/--applied`` where offered), ``remove-X TARGET`` deletes it;
``set`` and ``remove`` take ``--dry-run``, and topic policies ``-g/--global``.  A ``Policy``
says what differs from one policy to the next; ``register_policy`` adds its three commands.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sluice.admin_cli.commands.common import (
    add_applied,
    add_command,
    add_dry_run,
    add_global,
    dry_run_params,
)

VERBS = ("set", "get", "remove")


def no_flags(_parser: argparse.ArgumentParser) -> None:
    """Adds nothing (a policy whose verbs take no flag beyond the target)."""


@dataclass(frozen=True)
class Policy:
    """One policy's commands.

    ``suffix``: the commands' name after the verb (``dispatch-rate``); ``what``: how the help
    names it (``the topic dispatch rate``); ``target``: the positional argument and its help;
    ``path_of(args)``: the policy's REST path; ``add_flags`` / ``body_of``: the flags of
    ``set`` and the body they make; ``add_target_flags``: flags every verb takes after the
    target (``-s SUB``); ``applied``: ``get`` takes ``-ap``; ``global_flag``: every verb takes
    ``-g`` (a ``topicPolicies`` command)."""

    suffix: str
    what: str
    target: tuple[str, str]
    path_of: Callable[[argparse.Namespace], str]
    add_flags: Callable[[argparse.ArgumentParser], None]
    body_of: Callable[[argparse.Namespace], Any]
    add_target_flags: Callable[[argparse.ArgumentParser], None] = no_flags
    applied: bool = False
    global_flag: bool = False


def under(base_of: Callable[[argparse.Namespace], str], kind: str) -> Callable:
    """The path function of policy ``kind`` under the target path ``base_of(args)``."""

    def path_of(args: argparse.Namespace) -> str:
        return f"{base_of(args)}/{kind}"

    return path_of


def _scope(args: argparse.Namespace) -> dict:
    return {"isGlobal": True} if getattr(args, "global_policy", False) else {}


def _handlers(policy: Policy) -> dict[str, Callable[..., Any]]:
    def get_policy(args, admin):
        params = _scope(args)
        if getattr(args, "applied", False):
            params["applied"] = True
        return admin.request("GET", policy.path_of(args), params=params)

    def set_policy(args, admin):
        params = {**_scope(args), **dry_run_params(args)}
        body = policy.body_of(args)
        return admin.request("POST", policy.path_of(args), body=body, params=params)

    def remove_policy(args, admin):
        params = {**_scope(args), **dry_run_params(args)}
        return admin.request("DELETE", policy.path_of(args), params=params)

    return {"set": set_policy, "get": get_policy, "remove": remove_policy}


def register_policy(group: argparse._SubParsersAction, parents, policy: Policy) -> None:
    """Add ``set-``, ``get-`` and ``remove-`` ``policy.suffix`` to ``group``."""
    handlers = _handlers(policy)
    for verb in VERBS:
        parser = add_command(
            group,
            f"{verb}-{policy.suffix}",
            f"{verb.title()} {policy.what}",
            handlers[verb],
            parents,
        )
        parser.add_argument(policy.target[0], help=policy.target[1])
        policy.add_target_flags(parser)
        if verb == "set":
            policy.add_flags(parser)
        if verb == "get" and policy.applied:
            add_applied(parser)
        if verb != "get":
            add_dry_run(parser)
        if policy.global_flag:
            add_global(parser)
