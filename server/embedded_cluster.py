"""An embedded Redis Cluster: ``redis-server`` children in cluster mode on loopback ports.

The tests and the benchmarks use it as they use ``EmbeddedRedis``: ``masters`` primaries
(3 by default) and ``replicas`` replicas of each, on free ports, in a folder of their own,
joined with ``redis-cli --cluster create``; ``start`` returns once every node reports
``cluster_state:ok`` and agrees on the slots.  ``url`` names one master, which is all a
Sluice process needs (it discovers the others).  ``failover`` promotes a replica
(``CLUSTER FAILOVER`` on it), ``reshard`` moves slots between masters with
``redis-cli --cluster reshard`` while clients keep working.  ``kill`` is the unplanned fault:
SIGKILL of a node (``wait_promoted`` waits until the cluster, by itself, promoted a replica of
a killed master, about ``NODE_TIMEOUT_MS`` later), and ``restart`` starts a killed node again
(a killed master comes back as a replica of the one promoted in its place).  Every child dies
with its parent.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import redis

from server.embedded_redis import free_port, spawn_quietly
from server.processes import wait_or_kill
from sluice.protocol.connection import forget_cluster_mode


def poll_until(ready: Callable[[], bool], timeout: float, every: float, failure: str) -> None:
    """Ask ``ready()`` every ``every`` seconds until it is true (a Redis error: not yet);
    ``RuntimeError(failure)`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if ready():
                return
        except redis.RedisError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(failure)
        time.sleep(every)


# A node unreachable this long is failed and its replica promoted (Redis's default is 15 s).
NODE_TIMEOUT_MS = 2000


@dataclass
class Node:
    """One ``redis-server`` of the cluster."""

    port: int
    bus_port: int  # the cluster bus (free too: port + 10000 may be taken or out of range)
    process: subprocess.Popen | None = None
    client: redis.Redis | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def redis(self) -> redis.Redis:
        """A plain client on this node only (no redirections followed)."""
        if self.client is None:
            self.client = redis.Redis(port=self.port, socket_timeout=5, socket_connect_timeout=5)
        return self.client


START_ATTEMPTS = 3  # a node that exits at start (its port taken meanwhile) is tried again


class NodeExited(RuntimeError):
    """A node's redis-server exited while starting; the message ends with its log."""


class EmbeddedCluster:
    """Start, inspect, fail over, reshard and stop a private Redis Cluster."""

    def __init__(
        self, directory: Path, masters: int = 3, replicas: int = 0, binary: str | None = None
    ) -> None:
        self.directory = Path(directory)
        self.masters = masters
        self.replicas = replicas
        self.binary = binary or shutil.which("redis-server") or "redis-server"
        self.cli = shutil.which("redis-cli") or "redis-cli"
        self.nodes: list[Node] = []

    @property
    def url(self) -> str:
        """The URL of the first node (any node would do)."""
        return self.nodes[0].url

    def start(self, timeout: float = 60.0) -> EmbeddedCluster:
        """Start the nodes, create the cluster, wait until it serves every slot."""
        self.directory.mkdir(parents=True, exist_ok=True)
        count = self.masters * (1 + self.replicas)
        for attempt in range(START_ATTEMPTS):
            self.nodes = [Node(free_port(), free_port()) for _ in range(count)]
            for node in self.nodes:
                self._spawn(node)
            try:
                for node in self.nodes:
                    self._wait_ping(node, timeout)
                break
            except NodeExited:
                # A port taken between choosing it and binding it (another process got it
                # meanwhile): start again on other ports.
                self.stop()
                if attempt == START_ATTEMPTS - 1:
                    raise
        self._cluster_command(
            "create",
            *(f"127.0.0.1:{n.port}" for n in self.nodes),
            "--cluster-replicas",
            str(self.replicas),
            "--cluster-yes",
            timeout=timeout,
        )
        self.wait_replicas(timeout)
        return self

    def wait_replicas(self, timeout: float = 60.0) -> None:
        """Wait until every running replica is linked to its master and in sync."""

        def synced() -> bool:
            return all(
                n.redis().info("replication").get("master_link_status") == "up"
                and not n.redis().info("replication").get("master_sync_in_progress")
                for n in self.replica_nodes()
            )

        poll_until(synced, timeout, 0.05, "the replicas did not sync with their masters")

    def _spawn(self, node: Node) -> None:
        forget_cluster_mode("127.0.0.1", node.port)
        folder = self.directory / str(node.port)
        folder.mkdir(parents=True, exist_ok=True)
        args = [
            self.binary,
            "--port",
            str(node.port),
            "--bind",
            "127.0.0.1",
            "--cluster-enabled",
            "yes",
            "--cluster-port",
            str(node.bus_port),
            "--cluster-config-file",
            f"nodes-{node.port}.conf",
            "--cluster-node-timeout",
            str(NODE_TIMEOUT_MS),
            "--dir",
            str(folder),
            "--save",
            "",
            "--appendonly",
            "no",
            "--repl-diskless-sync-delay",
            "0",
            "--logfile",
            str(folder / "redis.log"),
        ]
        node.process = spawn_quietly(args)

    def _wait_ping(self, node: Node, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                node.redis().ping()
                return
            except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
                if node.process is not None and node.process.poll() is not None:
                    log = self.directory / str(node.port) / "redis.log"
                    tail = log.read_text(errors="replace")[-500:] if log.exists() else ""
                    raise NodeExited(f"redis-server on port {node.port} exited: {tail}") from None
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def wait_ok(self, timeout: float = 60.0) -> None:
        """Wait until every running node says ``cluster_state:ok``, knows every other running
        node (no handshake pending) and sees the same slot map."""
        poll_until(self._agreed, timeout, 0.1, "the Redis Cluster did not reach cluster_state:ok")

    def _agreed(self) -> bool:
        views = set()
        for node in self.running():
            info = node.redis().cluster("INFO")
            state = info if isinstance(info, dict) else {}
            if state.get("cluster_state") != "ok":
                return False
            known = node.redis().execute_command("CLUSTER NODES")
            flags = [v["flags"] for v in known.values() if "fail" not in v["flags"]]
            if len(flags) < len(self.running()) or any(
                "handshake" in f or "noaddr" in f for f in flags
            ):
                return False
            slots = node.redis().execute_command("CLUSTER SLOTS")
            views.add(tuple(sorted((s[0], s[1], s[2][1]) for s in slots)))
        return len(views) == 1

    def running(self) -> list[Node]:
        """Nodes whose process runs."""
        return [n for n in self.nodes if n.process is not None and n.process.poll() is None]

    def master_nodes(self) -> list[Node]:
        """The running nodes that are masters now."""
        return [n for n in self.running() if self.role(n) == "master"]

    def replica_nodes(self) -> list[Node]:
        """The running nodes that are replicas now."""
        return [n for n in self.running() if self.role(n) == "slave"]

    def role(self, node: Node) -> str:
        return node.redis().info("replication")["role"]

    def node_of_key(self, key: str) -> Node:
        """The master serving ``key``'s slot now."""
        probe = self.running()[0].redis()
        slot = int(probe.execute_command("CLUSTER KEYSLOT", key))
        port = _slot_owner(self.running()[0], slot)
        return next(n for n in self.nodes if n.port == port)

    def replica_of(self, master: Node) -> Node:
        """A replica of ``master``."""
        node_id = master.redis().execute_command("CLUSTER MYID")
        node_id = node_id.decode() if isinstance(node_id, bytes) else node_id
        for node in self.replica_nodes():
            if node.redis().info("replication").get("master_port") == master.port:
                return node
        raise RuntimeError(f"master {master.port} ({node_id}) has no replica")

    def failover(self, master: Node, timeout: float = 30.0) -> Node:
        """Promote a replica of ``master`` (``CLUSTER FAILOVER`` on it); the new master."""
        self.wait_replicas(timeout)
        replica = self.replica_of(master)
        deadline = time.monotonic() + timeout
        while self.role(replica) != "master":
            if time.monotonic() > deadline:
                raise RuntimeError("the failover did not complete")
            replica.redis().execute_command("CLUSTER FAILOVER")  # again if one timed out
            attempt = time.monotonic() + 6  # a manual failover times out after 5 s
            while self.role(replica) != "master" and time.monotonic() < attempt:
                time.sleep(0.05)
        self.wait_ok(timeout)
        return replica

    def kill(self, node: Node) -> None:
        """SIGKILL ``node``: no planned failover, no last write flushed to anyone."""
        if node.client is not None:
            node.client.close()
            node.client = None
        assert node.process is not None
        node.process.kill()
        node.process.wait()

    def wait_promoted(self, killed: Node, slot_key: str, timeout: float = 60.0) -> Node:
        """Wait until another node serves ``slot_key``'s slot (the killed master's replica,
        promoted by the cluster) and the running nodes agree again; that node."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                owner = self.node_of_key(slot_key)
                if owner.port != killed.port and self.role(owner) == "master":
                    break
            except (redis.RedisError, StopIteration):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("no replica was promoted in place of the killed master")
            time.sleep(0.05)
        self.wait_ok(max(deadline - time.monotonic(), 1.0))
        return owner

    def restart(self, node: Node, timeout: float = 60.0) -> None:
        """Start a killed node again with its own configuration; it rejoins the cluster."""
        self._spawn(node)
        self._wait_ping(node, timeout)
        self.wait_ok(timeout)

    def reshard(self, source: Node, target: Node, slots: int, timeout: float = 120.0) -> None:
        """Move ``slots`` slots from ``source`` to ``target`` with ``redis-cli --cluster
        reshard`` (keys migrate while clients keep working)."""
        ids = {}
        for node in (source, target):
            raw = node.redis().execute_command("CLUSTER MYID")
            ids[node.port] = raw.decode() if isinstance(raw, bytes) else raw
        self._cluster_command(
            "reshard",
            f"127.0.0.1:{source.port}",
            "--cluster-from",
            ids[source.port],
            "--cluster-to",
            ids[target.port],
            "--cluster-slots",
            str(slots),
            "--cluster-yes",
            "--cluster-pipeline",
            "10",
            timeout=timeout,
        )

    def _cluster_command(self, *args: str, timeout: float) -> None:
        """``redis-cli --cluster <args>``, then wait until the cluster is OK again."""
        subprocess.run(
            [self.cli, "--cluster", *args],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=timeout,
        )
        self.wait_ok(timeout)

    def flushall(self) -> None:
        """Empty every master."""
        for node in self.master_nodes():
            node.redis().flushall()

    def cpu_seconds(self) -> dict[int, float]:
        """CPU seconds (user + system) each running master has used, by port."""
        out = {}
        for node in self.master_nodes():
            info = node.redis().info("cpu")
            out[node.port] = float(info["used_cpu_user"]) + float(info["used_cpu_sys"])
        return out

    def stop(self, timeout: float = 10.0) -> None:
        """Stop every node (SIGTERM, then SIGKILL)."""
        for node in self.nodes:
            if node.client is not None:
                node.client.close()
                node.client = None
            if node.process is None:
                continue
            node.process.terminate()
        for node in self.nodes:
            if node.process is None:
                continue
            wait_or_kill(node.process, timeout)
            node.process = None

    def __enter__(self) -> EmbeddedCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _slot_owner(node: Node, slot: int) -> int:
    for start, end, master, *_ in node.redis().execute_command("CLUSTER SLOTS"):
        if start <= slot <= end:
            return int(master[1])
    raise RuntimeError(f"slot {slot} not served")
