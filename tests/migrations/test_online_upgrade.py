"""Migrations run online, expand then contract: the previous release keeps serving while the
schema moves to this release's head, and serves the new schema afterwards.

"The previous release" is this repository as it was just before its newest migration was
added (from git history, exported with ``git archive``; HEAD while that migration is not
committed yet), run as a real ``sluice api`` process
on a database at that release's migration head.  It writes some policies, then this release's
migrations run while it answers reads in a loop: every read answers 200, before, during and
after, with the same content.  A migration that drops or renames what the previous release
reads fails here; such a change belongs in a later "contract" migration, once no release that
reads it runs any more (docs/deploy.md, "Rolling upgrades").
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from alembic.script import ScriptDirectory

from migrations import alembic_config, upgrade
from server.embedded_redis import free_port
from server.processes import wait_or_kill
from tests import ROOT
from tests.conftest import create_database, drop_database

READS = (
    "/admin/v2/tenants",
    "/admin/v2/tenants/acme",
    "/admin/v2/namespaces/acme",
    "/admin/v2/namespaces/acme/online/dispatchRate",
    "/admin/v2/persistent/acme/online",
    "/admin/v2/persistent/acme/online/orders/partitions",
)


def git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else ""


def previous_release(folder: Path) -> str:
    """Export the code from before the newest migration into ``folder``; its migration head."""
    if shutil.which("git") is None or not git("rev-parse", "--git-dir"):
        pytest.skip("not a git checkout: the previous release cannot be exported")
    scripts = ScriptDirectory.from_config(alembic_config("sqlite://"))
    newest = scripts.get_revision(scripts.get_current_head())
    assert newest is not None and isinstance(newest.down_revision, str)
    path = Path(newest.path).resolve().relative_to(ROOT)
    added = git("log", "--no-renames", "--diff-filter=A", "--format=%H", "-1", "--", str(path))
    # Not committed yet (a migration being written): the previous release is HEAD.
    before = f"{added}^" if added else "HEAD"
    if not git("rev-parse", "--verify", "--quiet", before):
        pytest.skip("a shallow clone: the commit before the newest migration is not here")
    folder.mkdir()
    archive = subprocess.run(["git", "archive", before], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    return newest.down_revision


@pytest.fixture
def database():
    url = create_database("sluice_online")
    yield url
    drop_database(url)


def test_the_previous_release_serves_while_and_after_the_schema_moves(database, settings, tmp_path):
    old_code = tmp_path / "previous"
    previous_head = previous_release(old_code)
    upgrade(database, previous_head)
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(old_code),
        "DATABASE_URL": database,
        "REDIS_URL": settings.redis_url,
    }
    with (tmp_path / "previous-api.log").open("wb") as log:
        api = subprocess.Popen(
            [sys.executable, "-m", "server.cli", "api", "--host", "127.0.0.1", "--port", str(port)],
            cwd=old_code,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    failures: list[str] = []
    stop = threading.Event()
    try:
        http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10)
        deadline = time.monotonic() + 90
        while True:
            try:
                if http.get("/admin/v2/brokers/ready").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert api.poll() is None, (tmp_path / "previous-api.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the previous release never became ready"
            time.sleep(0.2)
        assert http.put(
            "/admin/v2/tenants/acme", json={"allowedClusters": ["standalone"]}
        ).is_success
        assert http.put("/admin/v2/namespaces/acme/online").is_success
        rate = {"dispatchThrottlingRateInMsg": 250, "ratePeriodInSecond": 1}
        assert http.post("/admin/v2/namespaces/acme/online/dispatchRate", json=rate).is_success
        assert http.put("/admin/v2/persistent/acme/online/orders/partitions", json=3).is_success
        before = {path: http.get(path).json() for path in READS}
        reads = 0

        def read_in_a_loop() -> None:
            nonlocal reads
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as reader:
                while not stop.is_set():
                    for path in READS:
                        answer = reader.get(path)
                        reads += 1
                        if answer.status_code != 200:
                            failures.append(f"{path}: {answer.status_code} {answer.text[:200]}")

        reader = threading.Thread(target=read_in_a_loop, daemon=True)
        reader.start()
        time.sleep(0.5)
        upgrade(database)  # this release's migrations, while the previous release serves
        time.sleep(0.5)
        stop.set()
        reader.join(15)
        after = {path: http.get(path).json() for path in READS}
        http.close()
    finally:
        stop.set()
        api.terminate()
        wait_or_kill(api, 15)
    assert reads > 0
    assert not failures, failures[:5]
    assert after == before
