"""Property-based robustness of the admin API: schemathesis over its own OpenAPI schema.

Every operation of ``/openapi.json`` gets a few generated requests (valid and invalid
parameters and bodies, derandomized so a run is reproducible) against the real admin server
on the session's PostgreSQL and Redis.  Two things must hold for every response: no 5xx, and
every 4xx carries Pulsar's error body, a JSON object with a non-empty string ``reason``.
Schema conformance checks are not run: the API follows Pulsar's paths and status codes, and
the generated schema does not list every documented error status.
"""

from __future__ import annotations

from collections import Counter

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

pytestmark = [pytest.mark.faults, pytest.mark.slow]

EXAMPLES = 6  # per operation; about 80 operations


@pytest.fixture
def api_schema(admin_server, http: httpx.Client):
    """The live schema, with a tenant and namespace so some generated paths exist."""
    http.put("/admin/v2/tenants/acme", json={"allowedClusters": ["standalone"]})
    http.put("/admin/v2/namespaces/acme/orders")
    return schemathesis.openapi.from_url(f"{admin_server.url}/openapi.json")


STATUSES: Counter[int] = Counter()


def reason_on_client_errors(ctx, response, case) -> None:
    """A 4xx answer is ``{"reason": "<non-empty text>"}`` with a JSON content type."""
    STATUSES[response.status_code] += 1
    if not 400 <= response.status_code < 500:
        return
    content_type = response.headers.get("content-type", [""])[0]
    assert content_type.startswith("application/json"), (
        f"{response.status_code} with content type {content_type!r}"
    )
    body = response.json()
    assert isinstance(body, dict) and isinstance(body.get("reason"), str) and body["reason"], (
        f"{response.status_code} without a reason: {response.text[:200]}"
    )


def test_no_server_errors_and_every_client_error_has_a_reason(api_schema):
    failures: list[str] = []
    operations = 0
    for result in api_schema.get_all_operations():
        operation = result.ok()
        operations += 1
        # Valid requests, and requests that break the schema on purpose (wrong types, missing
        # or extra fields, out-of-range values).
        strategy = operation.as_strategy(GenerationMode.POSITIVE) | operation.as_strategy(
            GenerationMode.NEGATIVE
        )

        @given(case=strategy)
        @settings(
            max_examples=EXAMPLES,
            derandomize=True,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.explicit, Phase.generate],
            database=None,
        )
        def check(case) -> None:
            case.call_and_validate(checks=[not_a_server_error, reason_on_client_errors])

        try:
            check()
        except Exception as exc:  # one operation's failures; the others still run
            failures.append(f"{operation.label}: {str(exc)[:600]}")
    assert operations > 50, f"only {operations} operations in the schema"
    # The checks ran, over successes and client errors alike.
    assert sum(STATUSES.values()) >= operations, STATUSES
    assert any(400 <= s < 500 for s in STATUSES) and any(s < 300 for s in STATUSES), STATUSES
    assert not failures, f"{len(failures)} of {operations} operations failed:\n" + "\n\n".join(
        failures
    )
