"""``GET /metrics`` of the admin service: request counts and latency by route template,
enforced writes and their wait, database and Redis health; open without a token."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

RATE = {"dispatchThrottlingRateInMsg": 100, "dispatchThrottlingRateInByte": -1,
        "ratePeriodInSecond": 1, "relativeToPublishRate": False}  # fmt: skip
ROUTE = "/admin/v2/namespaces/{tenant}/{namespace}/dispatchRate"


def scrape(http) -> dict[tuple[str, tuple], float]:
    answer = http.get("/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def test_the_admin_service_exports_its_metrics(http):
    assert http.put("/admin/v2/tenants/acme", json={}).status_code == 204
    assert http.put("/admin/v2/namespaces/acme/orders").status_code == 204
    before = scrape(http)
    for _ in range(3):
        assert http.get("/admin/v2/brokers/health").status_code == 200
        assert (
            http.post("/admin/v2/namespaces/acme/orders/dispatchRate", json=RATE).status_code == 204
        )
    assert http.get("/admin/v2/namespaces/acme/nope/dispatchRate").status_code == 404
    after = scrape(http)

    def delta(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0.0) - before.get(key, 0.0)

    posts = {"method": "POST", "route": ROUTE}
    assert delta("sluice_admin_http_requests_total", code="204", **posts) == 3
    assert delta("sluice_admin_http_requests_total", code="404", method="GET", route=ROUTE) == 1
    assert delta("sluice_admin_http_request_duration_seconds_count", **posts) == 3
    # Every request lands in a bucket; none of these took 10 s.
    assert delta("sluice_admin_http_request_duration_seconds_bucket", le="10.0", **posts) == 3
    # The liveness probe is answered before routing: not counted, not slowed.
    health = {"method": "GET", "route": "/admin/v2/brokers/health"}
    assert delta("sluice_admin_http_requests_total", code="200", **health) == 0
    # Each write waited for the workers (none live here: confirmed at once).
    assert delta("sluice_admin_writes_total", outcome="confirmed") == 3
    assert delta("sluice_admin_enforcement_wait_seconds_count", outcome="confirmed") == 3
    assert after[("sluice_admin_database_up", ())] == 1.0
    assert after[("sluice_admin_redis_up", ())] == 1.0
