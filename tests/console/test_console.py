"""The web console in a real browser: headless Chromium (Debian's ``chromium``, driven by
Playwright) against a real ``sluice standalone``, through the six user stories of the console.

The data is created over REST (tenants, topics, subscriptions, rates), produced and consumed
by the Python client (live rates, backlog, throttling), and for reports written as report rows
into the standalone's own database, as the report jobs write them.  Every page is saved as a
screenshot under ``test-artefacts/console`` (``SLUICE_TEST_ARTEFACTS`` moves it).
"""

from __future__ import annotations

import base64
import os
import re
import secrets
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, insert

import sluice
from api.console.router import ASSETS, CONSOLE_PATHS, STATIC
from models.reports import AdviceReportRow, BacklogReportRow, RateReportRow
from models.tokens import create_token
from tests.api.test_advice import advice_row
from tests.api.test_reports import NOW, backlog_row, rate_row, run_row
from tests.standalone_process import ROOT, Standalone

playwright_api = pytest.importorskip("playwright.sync_api")

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed"),
]
ARTEFACTS = Path(os.environ.get("SLUICE_TEST_ARTEFACTS", ROOT / "test-artefacts")) / "console"
ADMIN = "/admin/v2"
TOPIC = "persistent://acme/orders/created"
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
WAIT_MS = 15_000


def expect(locator):
    return playwright_api.expect(locator)


def shot(page, name: str) -> None:
    """Save the whole page as test-artefacts/console/<name>.png."""
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTEFACTS / f"{name}.png"), full_page=True)


def ok(answer: httpx.Response) -> httpx.Response:
    assert answer.status_code in (200, 204), (answer.request.url, answer.text)
    return answer


class Traffic:
    """Publishes to acme/orders/created and consumes with subscriptions audit and billing
    (billing limited to 5 msg/s per partition, so it is throttled) until stopped."""

    def __init__(self, redis_url: str) -> None:
        self.client = sluice.Client(redis_url)
        self.consumers = [
            self.client.subscribe(TOPIC, name, consumer_type=sluice.ConsumerType.Shared)
            for name in ("audit", "billing")
        ]
        self.producer = self.client.create_producer(TOPIC)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="console-traffic", daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            for i in range(10):
                # Three priorities: the topic view shows its subscriptions per priority.
                self.producer.send(b"x" * 64, priority=3 + i % 3)
            for consumer in self.consumers:
                for _ in range(20):
                    try:
                        message = consumer.receive(timeout_millis=5)
                    except sluice.Timeout:
                        break
                    consumer.acknowledge(message)
            self.stop.wait(0.25)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        self.client.close()


def stop(server: Standalone) -> None:
    """Ctrl-C, as a user stops it; killed if it has not stopped within 20 s (stopping is
    tests/test_standalone.py's subject, not this module's)."""
    try:
        server.interrupt(timeout=20)
    except subprocess.TimeoutExpired:
        assert server.process is not None
        server.process.kill()
        server.process.wait(10)


def write_reports(data_dir: Path) -> None:
    """Two succeeded report runs and a failed one, with 30 minutes of rate and backlog rows of
    acme/orders/created, in the standalone's SQLite file."""
    engine = create_engine(f"sqlite:///{data_dir / 'sluice.db'}")
    with engine.begin() as connection:
        for run_id, job, status in (
            (1, "rates", "succeeded"),
            (2, "backlog", "succeeded"),
            (3, "rates", "failed"),
        ):
            connection.execute(
                run_row(run_id, job, status, "executor lost", finished_at=NOW, rows=60)
            )
        rows = []
        for minute in range(30, 0, -1):
            rate = 60.0 + 40.0 * ((minute % 10) / 10)
            limit = 100.0 if minute > 15 else 80.0
            rows.append(
                rate_row(
                    1,
                    minute,
                    subscription="audit",
                    avg_rate=rate,
                    p95_rate=min(rate * 1.2, limit),
                    # A subscription limit on each of 2 partitions: the topic's is their sum.
                    # In the last 3 minutes one partition sleeps (it reports nothing): the
                    # sum of those that reported halves, the limit in force does not.
                    partitions=2 if minute > 3 else 1,
                    limit_per_partition_avg=limit / 2,
                    limit_topic_avg=limit if minute > 3 else limit / 2,
                    limit_limiter="subscription",
                    limit_source="subscription",
                )
            )
        connection.execute(insert(RateReportRow), rows)
        backlog = []
        for minute in range(30, 0, -1):
            row = backlog_row(2, "audit", growth=-2.0, rank=1)
            row.update(
                window_start=NOW - timedelta(minutes=minute),
                backlog_msgs=100 + 20 * minute,
                max_backlog_msgs=120 + 20 * minute,
                drain_rate=12.5,
                drain_seconds=(100 + 20 * minute) / 12.5,
                drain_status="draining",
            )
            backlog.append(row)
            # billing's backlog drained in the latest window: 1,000 at most, none at its end.
            empty = minute == 1
            row = backlog_row(2, "billing", growth=-10.0 if empty else 0.0, rank=2)
            row.update(
                window_start=NOW - timedelta(minutes=minute),
                backlog_msgs=0 if empty else 1000,
                max_backlog_msgs=1000,
                drain_rate=20.0,
                drain_seconds=0.0 if empty else 50.0,
                drain_status="empty" if empty else "draining",
            )
            backlog.append(row)
        connection.execute(insert(BacklogReportRow), backlog)
        connection.execute(run_row(4, "advice", "succeeded", "", finished_at=NOW, rows=1))
        connection.execute(
            insert(AdviceReportRow),
            [
                advice_row(
                    4,
                    "billing",
                    partitions=2,
                    limit_topic_at_end=10.0,
                    limit_per_partition_at_end=5.0,
                    limit_limiter="subscription",
                    limit_source="subscription",
                    span_end=NOW,
                )
            ],
        )
    engine.dispose()


@pytest.fixture(scope="module")
def standalone(tmp_path_factory) -> Iterator[Standalone]:
    server = Standalone(tmp_path_factory.mktemp("console")).start()
    http = httpx.Client(base_url=server.url, timeout=30)
    ok(
        http.put(
            f"{ADMIN}/tenants/acme",
            json={"adminRoles": ["acme-admin"], "allowedClusters": ["standalone"]},
        )
    )
    ok(http.put(f"{ADMIN}/tenants/globex", json={"adminRoles": []}))
    ok(http.put(f"{ADMIN}/namespaces/acme/orders"))
    ok(http.put(f"{ADMIN}/namespaces/globex/billing"))
    ok(http.put(f"{ADMIN}/persistent/acme/orders/created/partitions", json=2))
    ok(http.put(f"{ADMIN}/persistent/acme/orders/plain"))
    rate = {"dispatchThrottlingRateInMsg": 1000}
    ok(http.post(f"{ADMIN}/namespaces/acme/orders/dispatchRate", json=rate))
    traffic = Traffic(server.redis_url)  # subscribes audit and billing
    ok(
        http.post(
            f"{ADMIN}/persistent/acme/orders/created/billing/dispatchRate",
            json={"dispatchThrottlingRateInMsg": 5},
        )
    )
    traffic.thread.start()
    write_reports(server.data)
    yield server
    traffic.close()
    http.close()
    stop(server)


@pytest.fixture(scope="module")
def browser() -> Iterator:
    with playwright_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, request) -> Iterator:
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.set_default_timeout(WAIT_MS)
    yield page
    context.close()
    assert errors == [], errors


def test_the_console_is_served_offline_and_open(standalone: Standalone):
    for path in CONSOLE_PATHS:
        answer = httpx.get(standalone.url + path)
        assert answer.status_code == 200, path
        assert "default-src 'self'" in answer.headers["content-security-policy"]
    assert httpx.get(standalone.url + "/console/nothing.js").status_code == 404
    # Every file shipped is served (and the package data, ``static/*.{html,js,css}``, takes
    # each of them into a wheel).
    shipped = {path.name for path in STATIC.iterdir()}
    assert shipped == {"index.html", *ASSETS}
    assert all(re.fullmatch(r"[a-z]+\.(html|js|css)", name) for name in shipped)
    for name in ("index.html", *ASSETS):
        text = (STATIC / name).read_text()
        # Every asset is local: no URL of another host in the page, the scripts or the styles
        # (SVG's namespace name is a name, never fetched).
        text = text.replace("http://www.w3.org/2000/svg", "")
        assert not re.search(r"https?://|//[a-z0-9.-]+\.[a-z]{2,}/", text), name


def test_story_1_browse_with_live_stats(standalone: Standalone, page):
    page.goto(standalone.url + "/console")
    expect(page.get_by_role("heading", name="Tenants", level=1)).to_be_visible()
    expect(page.get_by_role("link", name="globex")).to_be_visible()
    shot(page, "1-tenants")
    page.get_by_role("link", name="acme", exact=True).click()
    expect(page.get_by_role("heading", name="Tenant acme")).to_be_visible()
    shot(page, "1-tenant")
    page.get_by_role("link", name="orders", exact=True).click()
    expect(page.get_by_role("heading", name="Namespace acme/orders")).to_be_visible()
    topics = page.locator("table.live")
    expect(topics.get_by_role("link", name="created")).to_be_visible()
    expect(topics.get_by_role("link", name="plain")).to_be_visible()
    # The badge needs two samples of the throttle counters: it appears after a refresh.
    expect(topics.locator("tr", has_text="created").get_by_text("Throttled now")).to_be_visible()
    shot(page, "1-namespace")
    topics.get_by_role("link", name="created").click()
    expect(page.get_by_role("heading", name="Topic created")).to_be_visible()
    subscriptions = page.locator("table", has=page.get_by_text("Subscriptions (live)"))
    billing = subscriptions.locator("tr", has_text="billing")
    expect(billing.get_by_text("Throttled now")).to_be_visible()
    expect(subscriptions.locator("tr", has_text="audit")).to_be_visible()
    # Live figures: messages flow, so the rates are not all zero and consumers are connected.
    topic_row = page.locator("table", has=page.get_by_text("Topic (live)")).locator("tbody tr")
    cells = topic_row.locator("td").all_inner_texts()
    assert float(cells[1]) > 0 and int(cells[4]) > 0, cells  # rate in, consumers
    levels = page.locator("table", has=page.get_by_text("Priority levels (live)"))
    for priority in ("5", "4", "3"):
        expect(
            levels.locator("tr", has_text="billing").filter(has_text=priority).first
        ).to_be_visible()
    shot(page, "1-topic")


def test_story_2_provenance_table(standalone: Standalone, page):
    page.goto(standalone.url + "/console#/topic/acme/orders/created")
    summary = page.locator("table.provenance")
    expect(summary).to_be_visible()
    rows = {
        row.locator("th").inner_text(): row.locator("td").all_inner_texts()
        for row in summary.locator("tbody tr").all()
    }
    assert rows["Topic created"] == ["1,000 msg/s", "topic limiter", "namespace"]
    assert rows["Subscription audit"] == ["1,000 msg/s", "topic limiter", "namespace"]
    assert rows["Subscription billing"] == ["5 msg/s", "subscription limiter", "subscription"]
    levels = page.locator("table.levels")
    topic_limiter = levels.locator("tr", has_text="topic limiter")
    expect(topic_limiter.get_by_text("1,000 msg/s (wins)")).to_be_visible()
    expect(levels.locator("tr", has_text="Subscription billing").get_by_text("5 msg/s (wins)"))
    shot(page, "2-provenance")
    # Who owns each partition is on the same page.
    expect(page.get_by_text("persistent://acme/orders/created-partition-1")).to_be_visible()


def test_story_3_dry_run_then_apply_and_a_refusal(standalone: Standalone, page):
    api = httpx.Client(base_url=standalone.url, timeout=30)
    path = f"{ADMIN}/namespaces/acme/orders/dispatchRate"
    page.goto(standalone.url + "/console#/ns/acme/orders")
    form = page.get_by_role("form", name="Namespace dispatch rate")
    expect(form.get_by_text("Now: 1,000 msg/s")).to_be_visible()
    form.get_by_label("Messages per period").fill("400")
    form.get_by_role("button", name="Preview change").click()
    dry_run = form.get_by_role("region", name="Dry run result")
    expect(dry_run).to_contain_text("This 1 subscription would go from 1,000 msg/s to 400 msg/s.")
    expect(dry_run).to_contain_text("These 2 topics would go from 1,000 msg/s to 400 msg/s.")
    expect(dry_run.get_by_role("row", name=re.compile("subscription audit"))).to_be_visible()
    shot(page, "3-dry-run")
    # Nothing changed before the confirmation...
    assert api.get(path).json()["dispatchThrottlingRateInMsg"] == 1000
    dry_run.get_by_role("button", name="Apply change").click()
    expect(page.locator(".flash")).to_have_text(
        "Applied: Namespace dispatch rate set to 400 msg/s."
    )
    # ... and the API has it after.
    assert api.get(path).json()["dispatchThrottlingRateInMsg"] == 400
    expect(
        page.get_by_role("form", name="Namespace dispatch rate").get_by_text("Now: 400 msg/s")
    ).to_be_visible()
    shot(page, "3-applied")

    # A single subscription's rate, on the topic page.
    page.goto(standalone.url + "/console#/topic/acme/orders/created")
    form = page.get_by_role("form", name="Dispatch rate of subscription audit")
    form.get_by_label("Messages per period").fill("50")
    form.get_by_role("button", name="Preview change").click()
    form.get_by_role("button", name="Apply change").click()
    expect(page.locator(".flash")).to_contain_text("Applied: Dispatch rate of subscription audit")
    sub_rate = api.get(f"{ADMIN}/persistent/acme/orders/created/audit/dispatchRate").json()
    assert sub_rate["dispatchThrottlingRateInMsg"] == 50

    # A refused write shows the API's reason and changes nothing.
    form = page.get_by_role("form", name="Topic dispatch rate")
    form.get_by_label("Messages per period").fill("-7")
    form.get_by_role("button", name="Preview change").click()
    alert = form.get_by_role("alert")
    expect(alert).to_contain_text("Refused (HTTP 400)")
    expect(alert).to_contain_text("greater than or equal to -1")
    shot(page, "3-refused")
    assert api.get(f"{ADMIN}/persistent/acme/orders/created/dispatchRate").json() is None

    # The broker level: its limiter (each worker) caps both topics below their 400 msg/s.
    page.goto(standalone.url + "/console#/broker")
    form = page.get_by_role("form", name="Broker dispatch rates")
    form.get_by_label("Setting").select_option("dispatchThrottlingRateInMsg")
    form.get_by_label("New value").fill("300")
    form.get_by_role("button", name="Preview change").click()
    expect(form.get_by_role("region", name="Dry run result")).to_contain_text(
        "These 2 topics would go from 400 msg/s to 300 msg/s."
    )
    shot(page, "3-broker-dry-run")
    form.get_by_role("button", name="Apply change").click()
    expect(page.locator(".flash")).to_contain_text("Applied: dispatchThrottlingRateInMsg set")
    values = api.get(f"{ADMIN}/brokers/configuration/values").json()
    assert values["dispatchThrottlingRateInMsg"] == "300"
    api.close()


def test_story_4_report_charts_and_runs(standalone: Standalone, page):
    page.goto(standalone.url + "/console#/reports/acme/orders")
    expect(page.get_by_role("heading", name="Reports of acme/orders")).to_be_visible()
    rate_chart = page.get_by_role("img", name=re.compile("Dispatch rate vs limit"))
    expect(rate_chart).to_be_visible()
    expect(page.get_by_role("img", name=re.compile("Backlog.*audit"))).to_be_visible()
    audit = page.locator(
        "section.report", has=page.get_by_role("heading", name=re.compile("audit"))
    )
    expect(audit.locator(".drain")).to_contain_text("Drain estimate: drains in about")
    expect(audit.locator(".drain")).to_contain_text("backlog 120 msgs")
    # The limit drawn is the one in force, summed over the partitions as the legend says.
    expect(audit.locator(".legend").first).to_contain_text("limit in force, 2 partitions summed")
    expect(audit.locator(".limit-note")).to_contain_text(
        "the subscription limiter, set on the subscription, 40 msg/s per partition"
        " \u00d7 2 partitions = 80 msg/s for the topic"
    )
    figures = audit.locator("details").first.locator("tbody tr")
    last = figures.last.locator("td").all_text_contents()
    assert last[-1] == "80", last  # the latest window's limit: 2 x 40 though 1 reported
    # Half an hour of minutes: a few distinct HH:MM ticks.
    ticks = audit.locator(".chart-svg").first.locator(".x-tick").all_text_contents()
    assert 3 <= len(ticks) <= 6 and len(set(ticks)) == len(ticks), ticks
    assert all(re.fullmatch(r"\d\d:\d\d", t) for t in ticks), ticks
    # billing's backlog is empty at the end of the latest window, as its chart's last point.
    billing = page.locator(
        "section.report", has=page.get_by_role("heading", name=re.compile("billing"))
    )
    expect(billing.locator(".drain")).to_contain_text("Drain estimate: no backlog (backlog 0 msgs")
    expect(billing.locator(".legend").last).to_contain_text("backlog at window end")
    # Interactive: keyboard focus reads the latest window out.
    rate_chart.focus()
    rate_chart.press("ArrowLeft")
    expect(page.locator(".readout").first).to_contain_text("average rate")
    shot(page, "4-reports")
    # The pickers: a window with no rows says so.
    page.get_by_label("Window").select_option("day")
    page.get_by_label("Time range").select_option("7d")
    page.get_by_role("button", name="Show").click()
    expect(page.get_by_text("No report rows in this range yet")).to_be_visible()
    assert "window=day" in page.url and "since=7d" in page.url
    page.goto(standalone.url + "/console#/runs")
    runs = page.locator("table", has=page.get_by_text("Report runs, newest first"))
    expect(runs.get_by_text("executor lost")).to_be_visible()
    expect(runs.get_by_text("succeeded").first).to_be_visible()
    shot(page, "4-runs")


def test_time_ticks_are_distinct_and_as_precise_as_the_span_needs(standalone: Standalone, page):
    page.goto(standalone.url + "/console#/reports/acme/orders")
    expect(page.get_by_role("heading", name="Reports of acme/orders")).to_be_visible()

    def labels(start: str, end: str) -> list[str]:
        script = "([a, b]) => timeTicks(Date.parse(a), Date.parse(b)).map((t) => t[1])"
        return page.evaluate(script, [start, end])

    # A minute: seconds (not five times 22:06).
    short = labels("2026-11-26T22:06:05Z", "2026-11-26T22:07:00Z")
    assert short == ["22:06:15", "22:06:30", "22:06:45", "22:07:00"]
    # An hour: minutes; a night across midnight: the date too; a month: dates.
    assert labels("2026-11-26T22:00:00Z", "2026-11-26T23:00:00Z") == [
        "22:00",
        "22:15",
        "22:30",
        "22:45",
        "23:00",
    ]
    night = labels("2026-11-26T20:00:00Z", "2026-11-27T04:00:00Z")
    assert night[0] == "11-26 20:00" and night[-1] == "11-27 04:00", night
    month = labels("2026-11-01T00:00:00Z", "2026-11-30T00:00:00Z")
    assert month == ["2026-11-05", "2026-11-12", "2026-11-19", "2026-11-26"]  # weekly
    for got in (short, night, month):
        assert 2 <= len(got) <= 6 and len(set(got)) == len(got), got


def test_story_8_limit_advice_preview_apply_and_simulate(standalone: Standalone, page):
    page.goto(standalone.url + "/console#/advice/acme/orders")
    expect(page.get_by_role("heading", name="Limit advice for acme/orders")).to_be_visible()
    expect(page.get_by_text("throttled 41% of the time").first).to_be_visible()
    expect(page.get_by_text("= 110 msg/s").first).to_be_visible()
    page.get_by_role("button", name="Preview and apply").click()
    expect(page.get_by_text("Nothing has changed yet.")).to_be_visible()
    page.get_by_role("button", name="Apply change").click()
    expect(page.get_by_text("Applied: subscription dispatchRate set to 55").first).to_be_visible()
    path = f"{ADMIN}/persistent/acme/orders/created/billing/dispatchRate"
    with httpx.Client(base_url=standalone.url, timeout=30) as http:
        assert http.get(path).json()["dispatchThrottlingRateInMsg"] == 55
        ok(http.post(path, json={"dispatchThrottlingRateInMsg": 5}))  # as the other stories had it
        # The workers' first stats snapshot comes one stats interval (10 s) after the start.
        body = {
            "tenant": "acme",
            "namespace": "orders",
            "level": "subscription",
            "topic": TOPIC,
            "subscription": "billing",
            "dispatchThrottlingRateInMsg": 55,
            "since": "1h",
        }
        deadline = time.monotonic() + 30
        while not ok(http.post(f"{ADMIN}/reports/simulate", json=body)).json()["subscriptions"]:
            assert time.monotonic() < deadline, "no stats snapshot of billing after 30 s"
            time.sleep(1)
    page.get_by_role("button", name="Simulate 55 msg/s per partition").click()
    expect(
        page.get_by_role("img", name=re.compile("Delivered rate, actual vs simulated"))
    ).to_be_visible()
    shot(page, "8-advice")


def test_story_5_audit_log_and_fleet(standalone: Standalone, page):
    page.goto(standalone.url + "/console#/audit")
    page.get_by_label("Entity type").fill("subscription.dispatchRate")
    page.get_by_role("button", name="Filter").click()
    audit = page.locator("table.audit")
    expect(audit.locator("tbody tr").first).to_contain_text("persistent://acme/orders/created")
    assert all(
        "subscription.dispatchRate" in text for text in audit.locator("tbody tr").all_inner_texts()
    )
    # The fields that changed, old -> new, not the raw documents.
    changed = audit.locator("ul.changes li", has_text="dispatchThrottlingRateInMsg: ")
    expect(changed.locator("ins").filter(has_text=re.compile(r"^5$")).first).to_be_visible()
    expect(audit.locator("th", has_text="Fields changed (old → new)")).to_be_visible()
    shot(page, "5-audit")
    page.get_by_label("Entity type").fill("")
    page.get_by_label("Role").fill("nobody")
    page.get_by_role("button", name="Filter").click()
    expect(page.get_by_text("Changes, newest first (0)")).to_be_visible()
    page.goto(standalone.url + "/console#/fleet")
    workers = page.locator("table", has=page.get_by_text("Workers of cluster standalone"))
    expect(workers.locator("tbody tr")).to_have_count(1)
    owners = page.locator("table", has=page.get_by_text("Owner of each partition"))
    expect(owners.get_by_text("persistent://acme/orders/created-partition-0")).to_be_visible()
    shot(page, "5-fleet")


def test_story_7_permissions_grant_and_revoke_with_a_dry_run(standalone: Standalone, page):
    page.goto(standalone.url + "/console#/ns/acme/orders")
    page.get_by_role("link", name="permissions").click()
    expect(page.get_by_role("heading", name="Permissions of acme/orders")).to_be_visible()
    form = page.get_by_role("form", name="Grant or revoke on namespace acme/orders")
    form.get_by_label("Role").fill("app")
    form.get_by_label("produce").check()
    form.get_by_role("button", name="Preview grant").click()
    dry_run = form.get_by_role("region", name="Dry run result")
    expect(dry_run).to_contain_text("role app: not granted → produce")
    api = httpx.Client(base_url=standalone.url, timeout=30)
    grants = f"{ADMIN}/namespaces/acme/orders/permissions"
    assert "app" not in api.get(grants).json()  # a preview changes nothing
    shot(page, "7-permissions-dry-run")
    dry_run.get_by_role("button", name="Apply change").click()
    expect(page.locator(".flash")).to_contain_text("Applied: role app: not granted → produce")
    assert api.get(grants).json()["app"] == ["produce"]
    namespace_grants = page.locator("table.grants").first
    expect(namespace_grants.get_by_role("row", name="app produce")).to_be_visible()
    # A topic's list shows the namespace's grant too; revoke it from the namespace.
    topic_grants = page.get_by_role("region", name="Grants on topic created")
    expect(topic_grants.get_by_role("row", name="app produce")).to_be_visible()
    form = page.get_by_role("form", name="Grant or revoke on namespace acme/orders")
    form.get_by_label("Role").fill("app")
    form.get_by_role("button", name="Preview revoke").click()
    expect(form.get_by_role("region", name="Dry run result")).to_contain_text(
        "role app: produce → not granted"
    )
    form.get_by_role("button", name="Apply change").click()
    expect(page.locator(".flash")).to_contain_text("Applied: role app: produce → not granted")
    assert "app" not in api.get(grants).json()
    api.close()


def test_story_9_resource_groups_and_their_members(standalone: Standalone, page):
    api = httpx.Client(base_url=standalone.url, timeout=30)
    group = f"{ADMIN}/resourcegroups/console-rg"
    assert api.put(group, json={"dispatchRateInMsgs": 100}).status_code == 204
    attach = f"{ADMIN}/namespaces/acme/orders/resourcegroup/console-rg"
    assert api.post(attach, params={"weight": 2}).status_code == 204
    try:
        page.goto(standalone.url + "/console")
        page.get_by_role("link", name="Resource groups").click()
        table = page.get_by_role("table", name="Resource groups and their members")
        row = table.locator("tr", has_text="console-rg")
        expect(row).to_contain_text("100/s")
        expect(row).to_contain_text("namespace acme/orders (weight 2)")
        shot(page, "9-resource-groups")
    finally:
        api.delete(f"{ADMIN}/namespaces/acme/orders/resourcegroup")
        api.delete(group)
        api.close()


def test_phone_sized_viewport(standalone: Standalone, browser):
    context = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    for name, fragment, last in (
        ("topic", "#/topic/acme/orders/created", "form.rate-form >> nth=-1"),
        ("reports", "#/reports/acme/orders", ".drain >> nth=-1"),
        ("audit", "#/audit", "table.audit"),
    ):
        page.goto(standalone.url + "/console" + fragment)
        expect(page.locator(last)).to_be_visible()  # the page is complete
        # Wide tables scroll inside their own region; the page itself never scrolls sideways.
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], (name, width)
        shot(page, f"phone-{name}")
    context.close()


# --- Story 6: authentication on --------------------------------------------------------------


@pytest.fixture(scope="module")
def secured(tmp_path_factory) -> Iterator[tuple[Standalone, dict[str, str]]]:
    key = secrets.token_bytes(32)
    env = {
        "SLUICE_AUTHENTICATION_ENABLED": "true",
        "SLUICE_AUTHORIZATION_ENABLED": "true",
        "SLUICE_SUPER_USER_ROLES": "root",
        "SLUICE_TOKEN_SECRET_KEY": "data:;base64," + base64.b64encode(key).decode(),
    }
    server = Standalone(tmp_path_factory.mktemp("console-secured"), env=env).start()
    tokens = {role: create_token(subject=role, secret_key=key) for role in ("root", "acme-admin")}
    http = httpx.Client(
        base_url=server.url, timeout=30, headers={"Authorization": f"Bearer {tokens['root']}"}
    )
    ok(http.put(f"{ADMIN}/tenants/acme", json={"adminRoles": ["acme-admin"]}))
    ok(http.put(f"{ADMIN}/tenants/globex", json={"adminRoles": []}))
    ok(http.put(f"{ADMIN}/namespaces/acme/orders"))
    ok(http.put(f"{ADMIN}/persistent/acme/orders/created/partitions", json=2))
    ok(http.put(f"{ADMIN}/persistent/acme/orders/created/subscription/audit"))
    http.close()
    yield server, tokens
    stop(server)


def sign_in(page, token: str) -> None:
    page.get_by_label("Token", exact=True).fill(token)
    page.get_by_role("button", name="Sign in").click()


def test_story_6_sign_in_and_roles(secured, page):
    server, tokens = secured
    nav = page.get_by_role("navigation", name="Main")
    page.goto(server.url + "/console")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    sign_in(page, tokens["root"][:-4] + "AAAA")
    expect(page.get_by_role("alert")).to_contain_text("Sign-in refused")
    shot(page, "6-sign-in-refused")

    # A tenant admin: no tenant list, no audit log, fleet, broker settings or report runs.
    sign_in(page, tokens["acme-admin"])
    expect(page.get_by_text("Signed in as acme-admin (tenant admin)")).to_be_visible()
    expect(nav.get_by_role("link")).to_have_count(1)
    # Its tenants are listed (from /admin/v2/whoami): no name to type, no other tenant.
    expect(page.get_by_text("these are the tenants you administer")).to_be_visible()
    expect(page.get_by_role("link", name="globex")).to_have_count(0)
    page.get_by_role("link", name="acme", exact=True).click()
    page.get_by_role("link", name="orders", exact=True).click()
    page.locator("table.live").get_by_role("link", name="created").click()
    expect(page.locator("table.provenance")).to_contain_text("Subscription audit")
    shot(page, "6-tenant-admin-topic")
    # The token is in this tab's session storage, and nowhere else.
    stored = page.evaluate(
        "({session: Object.keys(sessionStorage), local: localStorage.length,"
        " cookie: document.cookie})"
    )
    assert stored == {"session": ["sluice.token"], "local": 0, "cookie": ""}
    # Another tenant's page answers with the API's refusal.
    page.goto(server.url + "/console#/tenant/globex")
    expect(page.get_by_role("alert")).to_contain_text("HTTP 403")

    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    assert page.evaluate("sessionStorage.length") == 0

    # A super-user sees everything.
    sign_in(page, tokens["root"])
    expect(page.get_by_text("Signed in as root (super-user)")).to_be_visible()
    for name in ("Broker rates", "Report runs", "Audit log", "Workers"):
        expect(nav.get_by_role("link", name=name)).to_be_visible()
    expect(page.get_by_role("link", name="globex")).to_be_visible()
    shot(page, "6-super-user")
