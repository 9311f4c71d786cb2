"""Property-based robustness of the admin API: schemathesis over its own OpenAPI schema.

Every operation of ``/openapi.json`` gets a few generated requests (valid and invalid
parameters and bodies, derandomized so a run is reproducible) against the real admin server
on the session's PostgreSQL and Redis.  Two things must hold for every response: no 5xx, and
every 4xx carries Pulsar's error body, a JSON object with a non-empty string ``reason``.
Schema conformance checks are not run: the API follows Pulsar's paths and status codes, and
the generated schema does not list every documented error status.

Then stateful runs: sequences of calls that schemathesis chains through the links it infers
from the schema (a tenant created, then a namespace under it, a topic, its policies...), with
valid and invalid data; on top of the two checks above, every answer comes within
``BOUND_SECONDS`` and a refused call records no change.  And a property-based run of every body
route with integers of any size (beyond every 32- and 64-bit bound) in every field.
"""

from __future__ import annotations

import json
from collections import Counter

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from sqlalchemy import text

from tests.conftest import flush_redis, truncate
from tests.hostile import BOUND_SECONDS, RawClient, World, check_answer, load_api

pytestmark = [pytest.mark.faults, pytest.mark.slow]

EXAMPLES = 6  # per operation; about 80 operations


def populate(http: httpx.Client) -> None:
    """A tenant and namespace, so some generated paths exist."""
    http.put("/admin/v2/tenants/acme", json={"allowedClusters": ["standalone"]})
    http.put("/admin/v2/namespaces/acme/orders")


@pytest.fixture
def api_schema(admin_server, http: httpx.Client):
    """The live schema, with a tenant and namespace so some generated paths exist."""
    populate(http)
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


def audit_count(db) -> int:
    with db.connect() as connection:
        return int(connection.execute(text("SELECT count(*) FROM audit_log")).scalar_one())


STATEFUL_SCENARIOS = 25
STATEFUL_STEPS = 12


def test_stateful_sequences_keep_the_invariants(api_schema, db, http, redis_server):
    machine = api_schema.as_state_machine()
    calls: Counter[int] = Counter()

    class Checked(machine):  # type: ignore[misc, valid-type]
        def setup(self) -> None:
            # Every scenario starts from the same state: what a step draws depends on earlier
            # answers (the links), and Hypothesis wants the same draws when it runs a prefix
            # again; state left by the previous scenario made that vary (FlakyStrategyDefinition).
            truncate(db)
            flush_redis(redis_server.url)
            populate(http)

        def before_call(self, case) -> None:
            self._audit = audit_count(db)

        def validate_response(self, response, case, additional_checks=None, **kwargs) -> None:
            calls[response.status_code] += 1
            assert response.status_code < 500, f"{case.method} {case.formatted_path}: 5xx"
            assert response.elapsed < BOUND_SECONDS, f"{case.method} {case.formatted_path}"
            if response.status_code >= 400:
                reason_on_client_errors(None, response, case)
                assert audit_count(db) == self._audit, (
                    f"{case.method} {case.formatted_path} refused ({response.status_code}) "
                    "yet a change was recorded"
                )

    Checked.run(
        settings=settings(
            max_examples=STATEFUL_SCENARIOS,
            stateful_step_count=STATEFUL_STEPS,
            derandomize=True,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
    )
    # The run went beyond single calls: some succeeded (state was built), some were refused.
    assert sum(calls.values()) >= STATEFUL_SCENARIOS * 2, calls
    assert any(s < 300 for s in calls) and any(400 <= s < 500 for s in calls), calls


def any_json(integers: st.SearchStrategy[int]) -> st.SearchStrategy[object]:
    """JSON values whose numbers come from ``integers`` (and floats), nested a little."""
    scalars = st.one_of(st.none(), st.booleans(), integers, st.floats(allow_nan=False), st.text())
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
        max_leaves=6,
    )


EDGES = [2**31 - 1, 2**31, 2**32, 2**63 - 1, 2**63, 2**64, 2**70, -(2**63) - 1, -(2**31) - 1]
BIG_INTEGERS = st.one_of(
    st.sampled_from([*EDGES, -2, -1, 0, 1]),
    st.integers(min_value=2**31 - 4, max_value=2**200),
    st.integers(max_value=-(2**31)),
    st.integers(),
)
EXAMPLES_PER_BODY_ROUTE = 8


def test_every_body_field_takes_any_integer_without_failing(admin_server, http, db):
    api = load_api(admin_server.url)
    world = World(http, db, api, RawClient(admin_server.url)).build()
    answered: Counter[int] = Counter()

    def attack(op, bodies: st.SearchStrategy[object]) -> None:
        @given(body=bodies)
        @settings(
            max_examples=EXAMPLES_PER_BODY_ROUTE,
            derandomize=True,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.generate],
        )
        def check(body) -> None:
            before = audit_count(db)
            answer = world.raw.send(op.method, op.concrete(), json.dumps(body).encode())
            check_answer(answer)
            answered[answer.status] += 1
            if answer.status >= 400:
                assert audit_count(db) == before, f"refused, yet a change was recorded: {answer}"
            elif op.method == "PUT":  # created under the fresh name: make room for the next
                world.http.request("DELETE", op.concrete())

        check()

    for op in api.body_operations:
        fields = sorted((op.body or {}).get("properties") or {})
        if op.template.endswith("/partitions"):
            # Counts up to maxNumPartitionsPerPartitionedTopic (1,000 by default) are valid;
            # the larger valid ones only make the run slow.  Every count above the bound (to
            # be refused) and every small one is attacked.
            attack(op, BIG_INTEGERS.filter(lambda n: not 64 < n <= 1000))
        elif op.body_type == "integer":
            attack(op, BIG_INTEGERS)
        elif fields:
            values = BIG_INTEGERS | any_json(BIG_INTEGERS)
            attack(op, st.dictionaries(st.sampled_from(fields), values, min_size=1))
        else:  # a map of strings
            attack(op, st.dictionaries(st.text(max_size=8), any_json(BIG_INTEGERS), max_size=3))
    assert sum(answered.values()) >= len(api.body_operations) * 4, answered
    assert any(400 <= s < 500 for s in answered), answered
    world.healthy()
