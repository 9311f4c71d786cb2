"""Queueing report runs: one Celery app per process, shared by every request."""

from __future__ import annotations

import asyncio

import redis

from api.reports.queue import ReportQueue
from reports.celery_app import QUEUE


def test_one_app_sends_every_run_and_close_releases_it(settings, redis_server):
    client = redis.Redis.from_url(redis_server.url)
    client.delete(QUEUE)
    queue = ReportQueue(settings)

    async def send_three() -> tuple[list[str], list[object]]:
        ids, apps = [], []
        for jobs in (["rates"], ["backlog"], ["rates", "backlog"]):
            ids.append(await queue.send(jobs, 60))
            apps.append(queue._app)
        return ids, apps

    ids, apps = asyncio.run(send_three())
    try:
        assert len(set(ids)) == 3 and all(ids)
        assert apps[0] is not None and all(app is apps[0] for app in apps)
        assert client.llen(QUEUE) == 3
    finally:
        queue.close()
        client.delete(QUEUE)
    assert queue._app is None
