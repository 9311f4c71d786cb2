"""A resource group's dispatch limit, through the public surface only (REST and the client):
one budget for everything attached, strict from the consumers' side, shared fairly.

The strict bound: by T seconds after the subscriptions exist, at most LIMIT x (floor(T) + 1)
messages arrived in the whole group (T from just before the first ``subscribe``, arrivals
when ``receive`` returns: both only loosen it, so no tolerance).  Use: at least 95% of the
group's limit over a window of 10 s once every member runs.  Fairness: each member's share
of that window within 2 points of its weight's share (the acceptance check allows 5).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import redis

import sluice
from sluice.protocol import keys
from tests.receiving import BackgroundReceiver
from tests.workers.conftest import ADMIN, WorkerThread, rate, wait_until
from tests.workers.test_strict_bound import excess, new_topic
from workers.http import create_http_app

GROUPS = f"{ADMIN}/resourcegroups"
LIMIT = 100
WARMUP = 3.0  # seconds before the measured window: every member is dispatching by then
WINDOW = 10.0


def make_group(http, limit: int = LIMIT, name: str = "rg") -> str:
    answer = http.put(f"{GROUPS}/{name}", json={"dispatchRateInMsgs": limit})
    assert answer.status_code == 204, answer.text
    return name


def member_namespace(http, group: str | None, partitions: int = 0, weight: int | None = None):
    """A namespace of tenant acme with topic t, attached to ``group``; its topic's name."""
    ns, _path = new_topic(http, partitions, prefix="g")
    if group is not None:
        params = {"weight": weight} if weight else {}
        answer = http.post(f"{ADMIN}/namespaces/{ns}/resourcegroup/{group}", params=params)
        assert answer.status_code == 204, answer.text
    return f"persistent://{ns}/t"


class Backlogged(BackgroundReceiver):
    """A subscription with a deep backlog, consumed on a thread; arrival times recorded.

    The consumer receives from the moment it subscribes, while the backlog is written: the
    worker dispatches from the first message written, and an arrival is stamped when it
    arrives.  (Received only once the backlog was written, every message dispatched before
    was stamped with that moment, and on a loaded machine, where writing 3000 messages takes
    seconds, a member's first seconds could fall into the measured window.)"""

    def __init__(self, url: str, topic: str, count: int, origin: float) -> None:
        self.client = sluice.Client(url)
        super().__init__(
            self.client.subscribe(topic, "s", consumer_type=sluice.ConsumerType.Shared)
        )
        self.origin = origin
        self.times: list[float] = []
        self.start_receiving()
        producer = self.client.create_producer(topic, block_if_queue_full=True)
        for _ in range(count):
            producer.send_async(b"m" * 16, None)
        producer.flush()
        producer.close()

    def received(self, message: sluice.Message) -> None:
        self.times.append(time.monotonic() - self.origin)
        self.consumer.acknowledge(message)

    def close(self) -> list[float]:
        self.stop_receiving(10)
        self.consumer.close()
        self.client.close()
        return self.times


def within(times: list[float], start: float, end: float) -> int:
    return sum(start <= t < end for t in times)


def run_members(redis_url: str, topics: list[str], seconds: float, count: int = 3000):
    """Subscribe to each topic, fill its backlog, consume for ``seconds``; arrival times per
    topic, from just before the first subscribe."""
    origin = time.monotonic()
    with ThreadPoolExecutor(len(topics)) as pool:
        members = list(pool.map(lambda t: Backlogged(redis_url, t, count, origin), topics))
    time.sleep(max(0.0, seconds - (time.monotonic() - origin)))
    return [m.close() for m in members]


def check_group(runs: list[list[float]], limit: int = LIMIT) -> None:
    """The strict bound over the whole group, and at least 95% of the limit used."""
    everything = [t for times in runs for t in times]
    assert excess(everything, limit) <= 0, sorted(everything)[: limit + 5]
    used = within(everything, WARMUP, WARMUP + WINDOW)
    assert used >= 0.95 * limit * WINDOW, used


def measured_window(redis_url: str, topics: list[str]) -> list[int]:
    """Run the members through warm-up and window, check the group's bound and use, and
    count each member's arrivals in the measured window."""
    runs = run_members(redis_url, topics, WARMUP + WINDOW + 0.5)
    check_group(runs)
    return [within(times, WARMUP, WARMUP + WINDOW) for times in runs]


def test_two_backlogged_namespaces_share_the_group_half_and_half(
    http, namespace, worker, redis_server
):
    group = make_group(http)
    topics = [member_namespace(http, group, partitions=2), member_namespace(http, group)]
    counts = measured_window(redis_server.url, topics)
    assert abs(counts[0] / sum(counts) - 0.5) <= 0.02, counts


def test_weights_three_to_one(http, namespace, worker, redis_server):
    group = make_group(http)
    topics = [
        member_namespace(http, group, weight=3),
        member_namespace(http, group, partitions=2, weight=1),
    ]
    counts = measured_window(redis_server.url, topics)
    assert abs(counts[0] / sum(counts) - 0.75) <= 0.02, counts


def test_what_an_idle_member_leaves_goes_to_the_other(http, namespace, worker, redis_server):
    group = make_group(http)
    busy = member_namespace(http, group)
    idle = member_namespace(http, group)
    origin = time.monotonic()
    # The idle member has a subscription, a consumer and no backlog.
    quiet = Backlogged(redis_server.url, idle, 0, origin)
    loaded = Backlogged(redis_server.url, busy, 3000, origin)
    time.sleep(WARMUP + WINDOW + 0.5)
    runs = [loaded.close(), quiet.close()]
    check_group(runs)
    assert runs[1] == []


def test_a_member_that_drains_leaves_its_share_to_the_other(http, namespace, worker, redis_server):
    group = make_group(http)
    short = member_namespace(http, group)
    deep = member_namespace(http, group)
    origin = time.monotonic()
    with ThreadPoolExecutor(2) as pool:
        members = list(
            pool.map(
                lambda tc: Backlogged(redis_server.url, tc[0], tc[1], origin),
                [(short, 100), (deep, 3000)],
            )
        )
    time.sleep(WARMUP + WINDOW + 0.5)
    runs = [m.close() for m in members]
    assert len(runs[0]) == 100
    check_group(runs)


def test_the_limit_holds_across_two_workers(http, namespace, worker_settings, redis_server):
    first = WorkerThread(worker_settings.model_copy(update={"worker_id": "w-a"})).start()
    second = WorkerThread(worker_settings.model_copy(update={"worker_id": "w-b"})).start()
    try:
        group = make_group(http)
        topics = [
            member_namespace(http, group, partitions=4),
            member_namespace(http, group, partitions=4),
        ]
        time.sleep(2)  # both workers own partitions
        owners = [len(w.call(lambda worker: list(worker.runners))) for w in (first, second)]
        counts = measured_window(redis_server.url, topics)
        assert abs(counts[0] / sum(counts) - 0.5) <= 0.05, (counts, owners)
    finally:
        first.stop()
        second.stop()


def test_a_limit_changed_while_dispatching_never_oversells(http, namespace, worker, redis_server):
    group = make_group(http, 200)
    topics = [member_namespace(http, group), member_namespace(http, group)]
    origin = time.monotonic()
    with ThreadPoolExecutor(2) as pool:
        members = list(pool.map(lambda t: Backlogged(redis_server.url, t, 3000, origin), topics))
    time.sleep(3)
    answer = http.put(f"{GROUPS}/{group}", json={"dispatchRateInMsgs": 50})
    assert answer.status_code == 204
    changed = time.monotonic() - origin
    time.sleep(6)
    runs = [m.close() for m in members]
    everything = sorted(t for times in runs for t in times)
    assert excess([t for t in everything if t < changed], 200) <= 0
    # From the change on, the new limit: at most 50 x (floor(T) + 1) plus what the interrupted
    # period had left (at most the old period's 200).
    after = [t - changed for t in everything if t >= changed]
    assert excess(after, 50) <= 200, after[:60]
    # Counted from a moment that is no period's start (2 s after the change), a window of T
    # seconds may hold the end of one period and floor(T) + 1 whole ones: one period more.
    late = [t for t in after if t >= 2.0]
    assert excess([t - 2.0 for t in late], 50) <= 50


def test_the_group_combines_with_a_stricter_namespace_limit(http, namespace, worker, redis_server):
    group = make_group(http)
    strict = member_namespace(http, group)
    other = member_namespace(http, group)
    ns = strict.removeprefix("persistent://").rsplit("/", 1)[0]
    assert http.post(f"{ADMIN}/namespaces/{ns}/dispatchRate", json=rate(20)).status_code == 204
    runs = run_members(redis_server.url, [strict, other], WARMUP + WINDOW + 0.5)
    check_group(runs)  # the other member takes what the stricter one cannot use
    assert excess(runs[0], 20) <= 0


@pytest.mark.parametrize("level", ["tenant", "topic"])
def test_tenant_and_topic_attachments_limit_too(http, namespace, worker, redis_server, level):
    group = make_group(http, 50)
    topic = member_namespace(http, None)
    if level == "tenant":
        assert http.post(f"{ADMIN}/tenants/acme/resourcegroup/{group}").status_code == 204
    else:
        path = f"{ADMIN}/persistent/{topic.removeprefix('persistent://')}/resourceGroup"
        assert http.post(path, json=group).status_code == 204
    (times,) = run_members(redis_server.url, [topic], 5.0, count=1000)
    assert excess(times, 50) <= 0
    assert len(times) >= 0.9 * 50 * 4
    if level == "tenant":
        assert http.delete(f"{ADMIN}/tenants/acme/resourcegroup").status_code == 204


def test_the_worker_exports_each_group_s_sums_and_limits(http, namespace, worker, redis_server):
    """``/metrics`` of a worker: per group, what its topics here published and dispatched,
    the dispatches its budget cut short, and its limits; the group's budget is a reason of
    the subscriptions' throttled-dispatch counters."""
    from prometheus_client.parser import text_string_to_metric_families

    group = make_group(http, 50)
    topics = [member_namespace(http, group), member_namespace(http, group, partitions=2)]
    runs = run_members(redis_server.url, topics, 3.0, count=200)
    delivered = sum(len(times) for times in runs)
    app = create_http_app(worker.worker)

    async def scrape():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://worker") as c:
            return (await c.get("/metrics")).text

    def samples() -> dict:
        text = worker.call(lambda _w: scrape())
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text)
            for s in f.samples
        }

    label = (("resource_group", group),)

    def caught_up() -> bool:  # the stats documents are refreshed every second
        found = samples()
        return (
            found.get(("sluice_resource_group_msg_in_total", label)) == 400
            and found.get(("sluice_resource_group_msg_out_total", label), 0) >= delivered
        )

    wait_until(caught_up, 10)
    found = samples()
    assert found[("sluice_resource_group_bytes_out_total", label)] >= 16 * delivered
    assert found[("sluice_resource_group_dispatch_throttled_msg_events_total", label)] > 0
    assert found[("sluice_resource_group_dispatch_rate_limit_msgs", label)] == 50
    assert found[("sluice_resource_group_publish_rate_limit_msgs", label)] == -1
    by_group = [
        value
        for (name, labels), value in found.items()
        if name == "sluice_subscription_dispatch_throttled_msg_events_total"
        and ("reason", "group") in labels
    ]
    assert len(by_group) == 3 and sum(by_group) > 0  # three partitions, one subscription each


def test_the_group_publish_limit_slows_every_producer_of_the_group(
    http, namespace, worker, redis_server
):
    limit = 50
    answer = http.put(f"{GROUPS}/pub", json={"publishRateInMsgs": limit})
    assert answer.status_code == 204
    topics = [member_namespace(http, "pub"), member_namespace(http, "pub", partitions=2)]
    origin = time.monotonic()
    seconds = 4.0

    def produce(topic: str) -> list[float]:
        done = []
        with sluice.Client(redis_server.url) as client:
            producer = client.create_producer(topic)
            while time.monotonic() - origin < seconds:
                producer.send(b"p" * 16)
                done.append(time.monotonic() - origin)
            producer.close()
        return done

    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(produce, topics))
    everything = [t for times in runs for t in times]
    # Sends complete after they were written: the bound holds on completion times too.
    assert excess(everything, limit) <= 0, sorted(everything)[: limit + 5]
    assert len(everything) >= 0.9 * limit * 3, len(everything)
    assert all(len(times) >= limit for times in runs), [len(t) for t in runs]
    # Detached, the producers are free again.
    for topic in topics:
        ns = topic.removeprefix("persistent://").rsplit("/", 1)[0]
        assert http.delete(f"{ADMIN}/namespaces/{ns}/resourcegroup").status_code == 204
    with sluice.Client(redis_server.url) as client:
        producer = client.create_producer(topics[0])
        started = time.monotonic()
        for _ in range(limit * 3):
            producer.send(b"p")
        assert time.monotonic() - started < 2.0
        producer.close()


def test_measured_from_the_start_the_split_is_even_too(http, namespace, worker, redis_server):
    """As a user checks it: two deep backlogs made before anyone consumes, then a consumer on
    each (one a moment after the other), the split counted over the whole run (the pacing of
    the shares keeps the first consumer from taking the first period alone)."""
    group = make_group(http)
    topics = [member_namespace(http, group), member_namespace(http, group)]
    with sluice.Client(redis_server.url) as client:
        for topic in topics:
            path = f"{ADMIN}/persistent/{topic.removeprefix('persistent://')}"
            assert http.put(f"{path}/subscription/s").status_code == 204
            producer = client.create_producer(topic, block_if_queue_full=True)
            for _ in range(2000):
                producer.send_async(b"m" * 16, None)
            producer.flush()
            producer.close()
    origin = time.monotonic()
    members = [Backlogged(redis_server.url, topic, 0, origin) for topic in topics]
    time.sleep(10.0 - (time.monotonic() - origin))
    runs = [m.close() for m in members]
    everything = [t for times in runs for t in times]
    assert excess(everything, LIMIT) <= 0
    assert len(everything) >= 0.95 * LIMIT * 10
    share = len(runs[0]) / len(everything)
    assert abs(share - 0.5) <= 0.03, [len(times) for times in runs]


def test_a_backlog_without_consumers_starts_no_period_of_the_group(
    http, namespace, worker, redis_server
):
    """A member's backlog waits for its first consumer without taking from the group: the
    group's first period starts with that consumer, so its first second holds one quota."""
    group = make_group(http)
    topic = member_namespace(http, group)
    path = f"{ADMIN}/persistent/{topic.removeprefix('persistent://')}"
    assert http.put(f"{path}/subscription/s").status_code == 204
    with sluice.Client(redis_server.url) as client:
        producer = client.create_producer(topic, block_if_queue_full=True)
        for _ in range(1000):
            producer.send_async(b"m" * 16, None)
        producer.flush()
        producer.close()
    time.sleep(0.7)  # a period started by the backlog alone would end 0.3 s into the next one
    budget = redis.Redis.from_url(redis_server.url)
    assert budget.hget(keys.group_budget(group), "mws") is None  # no period of the group yet
    budget.close()
    origin = time.monotonic()
    member = Backlogged(redis_server.url, topic, 0, origin)
    time.sleep(2.5 - (time.monotonic() - origin))
    times = member.close()
    assert excess(times, LIMIT) <= 0
    assert len(times) >= 2 * LIMIT
