"""A Spark standalone cluster on the loopback interface, from the installed pyspark package.

``SparkStandalone`` starts one master and a few workers with pyspark's own ``bin/spark-class``
(``org.apache.spark.deploy.master.Master`` and ``org.apache.spark.deploy.worker.Worker``), each
in its own process group on free loopback ports, and waits until the master counts every
worker alive.  ``stop`` ends every process group it started (the workers' executors are their
children, so they go too): SIGTERM first, SIGKILL after a grace period.  Logs go to files in
the given folder, the workers' executor logs to ``worker-N/app-*/<executor>/``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pyspark

from server.embedded_redis import die_with_parent, free_port

SPARK_HOME = Path(pyspark.__file__).parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def loopback_environment() -> dict[str, str]:
    """The environment of every Spark process here: pyspark's home, loopback only."""
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(SPARK_HOME),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOCAL_HOSTNAME="127.0.0.1",
    )
    # A SPARK_CONF_DIR or master URL of the machine must not leak into the private cluster.
    for name in ("SPARK_CONF_DIR", "SPARK_MASTER_HOST", "SPARK_MASTER_PORT", "MASTER"):
        env.pop(name, None)
    return env


class SparkStandalone:
    """A master and ``workers`` workers (``cores`` and ``memory`` each) under ``folder``."""

    def __init__(self, folder: Path, *, workers: int = 2, cores: int = 1, memory: str = "512m"):
        self.folder = folder
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self._taken: set[int] = set()
        self.port = self._free_port()
        self.web_port = self._free_port()
        self.processes: list[subprocess.Popen[bytes]] = []

    def _free_port(self) -> int:
        """A free port none of this cluster's processes was given yet (``free_port`` alone
        may hand out the same port twice before the first process binds it: a worker's web
        UI then took the master's, and the master's JSON view answered with a worker page)."""
        while (port := free_port()) in self._taken:
            pass
        self._taken.add(port)
        return port

    @property
    def url(self) -> str:
        """The master URL drivers connect to."""
        return f"spark://127.0.0.1:{self.port}"

    def worker_dir(self, index: int) -> Path:
        """Where worker ``index`` (from 1) keeps its executors' folders and logs."""
        return self.folder / f"worker-{index}"

    def _spawn(self, name: str, args: list[str]) -> None:
        log = (self.folder / f"{name}.log").open("wb")
        try:
            process = subprocess.Popen(
                [str(SPARK_CLASS), *args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**loopback_environment(), "SPARK_DAEMON_MEMORY": "256m"},
                cwd=self.folder,
                start_new_session=True,  # its own process group: stop() ends it whole
                preexec_fn=die_with_parent,
            )
        finally:
            log.close()
        self.processes.append(process)

    def state(self) -> dict[str, Any]:
        """The master's own JSON view: workers, running and completed applications."""
        response = httpx.get(f"http://127.0.0.1:{self.web_port}/json/", timeout=5)
        response.raise_for_status()
        return response.json()

    def start(self, timeout: float = 60.0) -> SparkStandalone:
        """Start the master and the workers; wait until every worker is alive."""
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            self._spawn(
                "master",
                [
                    MASTER_CLASS,
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--webui-port",
                    str(self.web_port),
                ],
            )
            for index in range(1, self.workers + 1):
                work_dir = self.worker_dir(index)
                work_dir.mkdir()
                self._spawn(
                    f"worker-{index}",
                    [
                        WORKER_CLASS,
                        "--host",
                        "127.0.0.1",
                        "--port",
                        str(self._free_port()),
                        "--webui-port",
                        str(self._free_port()),
                        "--cores",
                        str(self.cores),
                        "--memory",
                        self.memory,
                        "--work-dir",
                        str(work_dir),
                        self.url,
                    ],
                )
            self._wait_for_workers(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_for_workers(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        alive = 0
        while time.monotonic() < deadline:
            for process in self.processes:
                if process.poll() is not None:
                    raise RuntimeError(
                        f"a Spark process exited with {process.returncode}: {self.logs()}"
                    )
            # Not ready yet: no answer, or a page that is not the master's JSON view.
            with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
                alive = self.state()["aliveworkers"]
                if alive == self.workers:
                    return
            time.sleep(0.25)
        raise RuntimeError(
            f"{alive} of {self.workers} Spark workers alive after {timeout:g} s: {self.logs()}"
        )

    def logs(self, tail: int = 2_000) -> str:
        """The end of every daemon log, for failure messages."""
        parts = []
        for path in sorted(self.folder.glob("*.log")):
            parts.append(f"--- {path.name}\n{path.read_text(errors='replace')[-tail:]}")
        return "\n".join(parts)

    def stop(self, grace: float = 15.0) -> None:
        """End every process group started here: SIGTERM, then SIGKILL after ``grace``."""
        for process in self.processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for process in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(max(0.1, deadline - time.monotonic()))
            # The group may outlive its leader (an executor JVM): kill what is left of it.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        self.processes.clear()
