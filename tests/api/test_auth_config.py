"""Security settings and the policy table, checked without a server."""

from __future__ import annotations

import base64

import pytest

from api.auth import Access, AccessControl, required_access
from models.settings import Settings
from models.tokens import create_secret_key, create_token


def test_settings_from_the_environment(monkeypatch):
    key = create_secret_key()
    monkeypatch.setenv("SLUICE_AUTHENTICATION_ENABLED", "true")
    monkeypatch.setenv("SLUICE_AUTHORIZATION_ENABLED", "true")
    monkeypatch.setenv("SLUICE_SUPER_USER_ROLES", "admin, ops")
    monkeypatch.setenv("SLUICE_TOKEN_SECRET_KEY", "data:;base64," + base64.b64encode(key).decode())
    control = AccessControl.from_settings(Settings(_env_file=None))
    assert (control.authentication, control.authorization) == (True, True)
    assert control.super_users == {"admin", "ops"}
    assert control.authenticate("Bearer " + create_token(subject="ops", secret_key=key)) == "ops"


@pytest.mark.parametrize(
    ("updates", "message"),
    [
        ({"authorization_enabled": True}, "needs SLUICE_AUTHENTICATION_ENABLED"),
        ({"authentication_enabled": True}, "no token key is configured"),
        (
            {"authentication_enabled": True, "token_secret_key": "a", "token_public_key": "b"},
            "only one",
        ),
        ({"authentication_enabled": True, "token_public_key": "nope"}, "not a PEM or DER"),
        ({"authentication_enabled": True, "token_public_key_file": "/no/such"}, "Cannot read"),
    ],
)
def test_bad_security_settings_fail_at_start(updates, message):
    with pytest.raises(ValueError, match=message):
        AccessControl.from_settings(Settings(_env_file=None, **updates))


def test_policy_table_prefers_the_longest_prefix_and_denies_unknown_routes():
    assert required_access("/admin/v2/brokers/health") is Access.OPEN
    assert required_access("/admin/v2/brokers/healthcheck") is Access.SUPER_USER
    assert required_access("/admin/v2/persistent/{tenant}/{namespace}") is Access.TENANT_ADMIN
    assert required_access("/admin/v2/reports/rates/{tenant}/{namespace}") is Access.TENANT_ADMIN
    assert required_access("/admin/v2/reports/runs") is Access.SUPER_USER
    assert required_access("/admin/v2/something-new") is Access.SUPER_USER
