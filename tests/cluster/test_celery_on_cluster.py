"""Celery (broker and result backend) on a 3-master Redis Cluster, given only ``REDIS_URL``.

A ``celery worker`` process of the report app and a client app are given the URL of a master
that does not serve Celery's slot; a task goes through the broker to the worker and its result
back through the backend, and every key Celery wrote is under ``{sluice-celery}``, on the one
master serving that slot.
"""

from __future__ import annotations

import os
import subprocess

import pytest
from redis.crc import key_slot

from models.settings import Settings
from reports.celery_app import make_celery
from reports.celery_redis import PREFIX, TAG
from server.processes import wait_or_kill
from server.standalone import celery_worker
from tests.cluster.processes import ROOT

pytestmark = pytest.mark.cluster


def test_a_task_and_its_result_go_through_the_cluster(redis_cluster, tmp_path):
    slot = key_slot(TAG.encode())
    home = redis_cluster.node_of_key(TAG)
    elsewhere = next(n for n in redis_cluster.master_nodes() if n.port != home.port)
    env = {**os.environ, "REDIS_URL": elsewhere.url, "SLUICE_DATA_DIR": str(tmp_path)}
    with (tmp_path / "celery.log").open("wb") as log:
        worker = subprocess.Popen(
            celery_worker("--pool", "solo", "--loglevel", "warning"),
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        app = make_celery(Settings(redis_url=elsewhere.url, data_dir=tmp_path))
        assert app.conf.broker_url == home.url
        result = app.send_task("celery.accumulate", args=(1, 2), queue=app.conf.task_default_queue)
        assert list(result.get(timeout=60)) == [1, 2]
        written = home.redis().keys("*")
        assert any(k.decode().startswith(PREFIX) for k in written)
        assert all(
            int(home.redis().execute_command("CLUSTER KEYSLOT", k)) == slot
            for k in written
            if b"celery" in k.lower()
        )
        for node in redis_cluster.master_nodes():
            if node.port != home.port:
                assert not [k for k in node.redis().keys("*") if b"celery" in k.lower()]
    finally:
        worker.terminate()
        wait_or_kill(worker, 20)
