"""Redis ACL rules of the data plane: what each kind of Redis user may do.

Sluice has no broker between a client and Redis, so a role's produce and consume grants
(``models.permissions``) are enforced by Redis itself, through one ACL user per client
session (``dataplane.sessions``).  This module turns grants into that user's rules; it is pure
(no Redis calls) so that the rules can be read, tested and rendered into files.

Every key of a topic partition starts with ``sl:{tenant/namespace/topic...}:``
(``sluice.protocol.keys``), so a namespace or a topic is a key pattern.  A grant becomes ACL
*selectors* (Redis 7): each selector allows a few commands on a few keys of the granted scope
and nothing else, and a command runs only when one selector allows the command together with
every key it names.  The client's scripts run with ``EVALSHA`` restricted to their own SHA-1
digests (``+evalsha|<sha>``; no ``EVAL``, no ``SCRIPT LOAD``), and every command a script calls
is checked again against the same selectors.  So, with the credentials a client received:

* ``produce`` on a scope may append to its partitions' streams (``XADD``), count into their
  producer counters and register producers; it cannot read an entry back.  A partition's
  streams are ``log`` and, with priority level streams, ``log:<L>`` (``sluice.protocol.keys``):
  a send that makes a level stream writes the ``levels`` hash and makes the subscriptions'
  consumer groups on it.  For a backlog quota of ``lowest_priority_eviction`` it may also
  read the groups' positions and delete (and acknowledge) entries, which that policy's sends
  do (docs/priority.md).
* ``consume`` may read the streams (``XRANGE``) and the ``levels`` hash, manage its
  subscriptions' consumer groups and their state, and pop its receiver queues; it cannot
  append.
* Nothing outside a granted scope can be named; the workers' own keys (leases, limiter state,
  stats documents) are in no selector; administrative commands (``FLUSHALL``, ``CONFIG``,
  ``KEYS``, ``ACL``, ``SCRIPT FLUSH``, ``DEBUG``, ...) are in none either.

Service users (the admin service, the workers, the reports' Celery processes) are trusted:
everything but ``@dangerous`` commands, plus what each needs of those (``ACL`` for the admin
service, which manages session users).  ``render_acl_file`` writes all of it as a Redis ACL
file, with the ``default`` user switched off.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sluice.protocol import keys
from sluice.protocol.names import TopicName
from sluice.protocol.scripts import CONSUME, GROUP_PUBLISH, PRODUCE, SCRIPTS, scripts_for

# The scripts a client calls, by action (each script's spec names the action that may call it).
ACTION_SCRIPTS = {action: scripts_for(action) for action in (PRODUCE, CONSUME)}

# What each action may do, as (commands, key suffixes after the partition prefix ``sl:{P}:``).
# A suffix ending in "*" is a pattern.  Keys only read are marked with a leading "%R".
PRODUCE_RULES: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("xadd",), ("log", "log:*")),
    # The counters; whether the partition keeps priorities in its stream, or has level streams.
    (("hincrby", "hget", "hset"), ("stats",)),
    (("scard", "del"), ("idle",)),
    (("del",), ("dormant",)),
    (("get", "hget", "hmget"), ("%Rquota", "%Rlimits")),
    (("hget", "hmget", "hset", "pexpireat", "del"), ("pubrate",)),
    (("zadd", "zcard", "zremrangebyscore", "zscore", "zrem"), ("producers",)),
    # Lowest-priority eviction (docs/priority.md): produce.lua reads the groups' positions,
    # deletes the evicted entry (acknowledging it where it was read ahead) and keeps the
    # partition's priority index.  Nothing here returns an entry's content.
    (("xinfo|groups", "xpending", "xack", "xdel", "xgroup|setid"), ("log", "log:*")),
    (("zadd", "zrange", "zrem", "zlexcount"), ("pq:*",)),
    # Level streams (lib/levels.lua): produce.lua writes the levels hash and makes every
    # subscription's group on a level stream it creates (it reads the subscription names).
    (("hgetall", "hget", "hmget", "hset"), ("levels",)),
    (("xgroup|create",), ("log:*",)),
    (("smembers",), ("%Rsubs",)),
)
GROUP_PUBLISH_PATTERN = "sl:{rg:*}:publish"
GROUP_PUBLISH_COMMANDS = (f"evalsha|{GROUP_PUBLISH.sha}", "hmget", "hset", "pexpireat")
CONSUME_RULES: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (
        (
            "xrange",
            "xrevrange",
            "xinfo|stream",
            "xpending",
            "xack",
            "xgroup|create",
            "xgroup|destroy",
            "xgroup|delconsumer",
        ),
        ("log", "log:*"),
    ),
    (("hget", "hmget", "hgetall", "hkeys"), ("%Rlevels",)),
    (("sadd", "srem", "sismember", "smembers", "scard"), ("subs",)),
    (("srem", "sismember"), ("idle",)),
    (("del",), ("dormant",)),
    (("hget", "hmget", "hgetall"), ("%Rlimits",)),
    (("get", "incr", "pexpire", "pttl"), ("subrate:*",)),
    # The subscription's own state; the SUBSCRIPTION limiter ("lim") and the Key_Shared ring
    # ("ks") are the workers' and only deleted with the subscription.
    (
        (
            "get",
            "set",
            "hget",
            "hmget",
            "hgetall",
            "hset",
            "hsetnx",
            "hincrby",
            "hdel",
            "hkeys",
            "zadd",
            "zcount",
            "zscore",
            "zrem",
            "zrange",
            "zrangebyscore",
            "del",
            "lmpop",
            "blmpop",
        ),
        (
            "s:*:meta",
            "s:*:cursor",
            "s:*:permits",
            "s:*:alive",
            "s:*:info",
            "s:*:redeliver",
            "s:*:waitp",
            "s:*:waitack",
            "s:*:stats",
            "s:*:q:*",
        ),
    ),
    (("del",), ("s:*",)),
)

# Every session user: its own connection, the topic registry and client settings (read only,
# by name), the wake-up channel, and what cluster clients ask to find their nodes.
SESSION_BASE = (
    "+ping",
    "+echo",
    "+hello",
    "+auth",
    "+select",
    "+time",
    "+command",
    "+client|info",
    "+client|id",
    "+client|setname",
    "+client|getname",
    "+cluster|info",
    "+cluster|slots",
    "+cluster|shards",
    "+cluster|nodes",
    "+cluster|myid",
    "+readonly",
    "+readwrite",
    "+script|exists",
    "+publish",
    "&" + keys.WAKE_CHANNEL,
    # A producer under durableAcks waits for its writes' replicas (no key is touched).
    # WAITAOF (Redis 7.2) is not named: a 7.0 server refuses a rule for a command it lacks.
    "+wait",
)
META_READ = ("+hget", "+hmget", f"%R~{keys.TOPICS}", f"%R~{keys.CLIENT_CONFIG}")
# A consumer that deletes its subscription leaves a mark for the workers (write only; the
# workers check it against Redis before they act on it).
TOMBSTONE_WRITE = ("+hset", f"%W~{keys.TOMBSTONES}")

SERVICE_USERS = {
    "api": "sluice-api",
    "worker": "sluice-worker",
    "reports": "sluice-reports",
}
_SERVICE_BASE = ("~*", "&*", "+@all", "-@dangerous", "+info", "+client|list", "+role")
SERVICE_RULES: dict[str, tuple[str, ...]] = {
    "api": (*_SERVICE_BASE, "+acl|setuser", "+acl|deluser", "+acl|users", "+acl|getuser"),
    "worker": _SERVICE_BASE,
    "reports": _SERVICE_BASE,
}

SESSION_USER_PREFIX = "sl-session-"
_GLOB = re.compile(r"[*?\[\]\\\s]")


@dataclass(frozen=True)
class Scope:
    """What one grant covers: a namespace (``topic`` None) or one topic with its partitions."""

    tenant: str
    namespace: str
    topic: str | None = None  # the base topic's local name

    @property
    def base_topic(self) -> str | None:
        """The full name of the scope's topic (None for a namespace scope)."""
        if self.topic is None:
            return None
        return TopicName(self.tenant, self.namespace, self.topic).full

    def partition_prefixes(self) -> tuple[str, ...]:
        """Glob patterns of the ``sl:{P}:`` prefixes of every partition in the scope (names
        hold ``[-=:.\\w]`` only, no glob characters, so a name matches only itself)."""
        for name in (self.tenant, self.namespace, self.topic or ""):
            if name != "*" and _GLOB.search(name):
                raise ValueError(f"not a valid name for a grant: {name!r}")
        if self.topic is None:
            return (f"{keys.PREFIX}:{{{self.tenant}/{self.namespace}/*}}:",)
        body = f"{self.tenant}/{self.namespace}/{self.topic}"
        return (f"{keys.PREFIX}:{{{body}}}:", f"{keys.PREFIX}:{{{body}-partition-[0-9]*}}:")


ALL_TOPICS = Scope("*", "*")  # a super-user's scope: every tenant's topics


def script_sha(name: str) -> str:
    """The SHA-1 digest ``EVALSHA`` names a data-plane script by."""
    return SCRIPTS[name].sha


def _selector(commands: Iterable[str], patterns: Iterable[str]) -> str:
    parts = [f"+{c}" for c in commands]
    for pattern in patterns:
        if pattern.startswith("%R"):
            parts.append(f"%R~{pattern[2:]}")
        else:
            parts.append(f"~{pattern}")
    return "(" + " ".join(parts) + ")"


def grant_selectors(grants: Iterable[tuple[Scope, Iterable[str]]]) -> list[str]:
    """The ACL selectors for every (scope, actions) grant of one role.

    The scopes of one action share its selectors (one pattern per scope in each), so a role
    with many grants has a few selectors with many patterns: Redis tries a command against
    the selectors in turn, and one that lacks the command is passed over at once."""
    prefixes: dict[str, list[str]] = {}
    for scope, actions in grants:
        for action in actions:
            if action not in ACTION_SCRIPTS:
                raise ValueError(f"unknown action {action!r}")
            prefixes.setdefault(action, []).extend(scope.partition_prefixes())
    selectors: list[str] = []
    for action in sorted(prefixes):
        rules = PRODUCE_RULES if action == PRODUCE else CONSUME_RULES
        mine = list(dict.fromkeys(prefixes[action]))
        # The script calls themselves: EVALSHA checks the keys it is given (read and write).
        evalsha = [f"evalsha|{spec.sha}" for spec in ACTION_SCRIPTS[action]]
        selectors.append(_selector(evalsha, [p + "*" for p in mine]))
        for commands, suffixes in rules:
            patterns = []
            for suffix in suffixes:
                read_only = suffix.startswith("%R")
                bare = suffix.removeprefix("%R")
                patterns += [("%R" if read_only else "") + p + bare for p in mine]
            selectors.append(_selector(commands, patterns))
        if action == PRODUCE:
            # A resource group's publish window is the group's, shared by its producers.
            selectors.append(_selector(GROUP_PUBLISH_COMMANDS, [GROUP_PUBLISH_PATTERN]))
    return selectors


def session_rules(
    password_hash: str, grants: Iterable[tuple[Scope, Iterable[str]]], *, enabled: bool = True
) -> list[str]:
    """Every rule of a session user, from scratch (``ACL SETUSER user <rules>``).

    ``grants`` are (scope, actions) pairs; ``password_hash`` the SHA-256 hex digest of the
    session's password (Redis keeps only that)."""
    rules = ["reset", "on" if enabled else "off", f"#{password_hash}", "resetchannels"]
    rules += list(SESSION_BASE) + list(META_READ)
    grants = [(scope, list(actions)) for scope, actions in grants]
    rules += grant_selectors(grants)
    if any("consume" in actions for _, actions in grants):
        rules.append("(" + " ".join(TOMBSTONE_WRITE) + ")")
    return rules


def render_acl_file(passwords: Mapping[str, str]) -> str:
    """A Redis ACL file: the service users (``passwords``: service -> plain password, for
    ``api``, ``worker``, ``reports``) and the ``default`` user switched off."""
    # "off": no connection can be or become the default user.  Its rights stay whole: Redis
    # 7.0 replays the transactions of its append-only file as the default user, and without
    # them every MULTI/EXEC written before a restart would be lost when it loads.
    lines = ["user default off ~* &* +@all"]
    for service, user in SERVICE_USERS.items():
        secret = passwords[service]
        if not secret or any(c.isspace() for c in secret):
            raise ValueError(f"the {service} password must be non-empty, without spaces")
        lines.append(f"user {user} on >{secret} " + " ".join(SERVICE_RULES[service]))
    return "\n".join(lines) + "\n"
