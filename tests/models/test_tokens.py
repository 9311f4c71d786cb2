"""Token functions: key specs, durations, signing and verification."""

from __future__ import annotations

from datetime import timedelta

import pytest

from models.errors import InvalidInput, Unauthorized
from models.tokens import (
    TokenVerifier,
    create_key_pair,
    create_secret_key,
    create_token,
    parse_duration,
    read_key,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("10", 10),
        ("10s", 10),
        ("5m", 300),
        ("2h", 7200),
        ("1d", 86400),
        ("1w", 604800),
        ("1y", 31536000),
    ],
)
def test_durations_use_pulsars_units(text, seconds):
    assert parse_duration(text) == timedelta(seconds=seconds)


def test_key_specs(tmp_path):
    (tmp_path / "k").write_bytes(b"\x00\x01")
    assert read_key(f"file:{tmp_path}/k") == b"\x00\x01"
    assert read_key(f"file://{tmp_path}/k") == b"\x00\x01"
    assert read_key("data:;base64,AAE=") == b"\x00\x01"
    assert read_key("plain-secret") == b"plain-secret"
    with pytest.raises(InvalidInput):
        read_key("data:;base64,!!")


@pytest.mark.parametrize("algorithm", ["RS256", "ES256"])
def test_public_key_verification_refuses_hmac_tokens_signed_with_the_public_key(algorithm):
    private, public = create_key_pair(algorithm)
    verifier = TokenVerifier.from_keys(public_key=public)
    assert verifier.role(create_token(subject="svc", private_key=private)) == "svc"
    # The classic algorithm-confusion attack: an HS256 token keyed with the public key.
    forged = create_token(subject="root", secret_key=b"x" * 32)
    with pytest.raises(Unauthorized):
        verifier.role(forged)


def test_verifier_reasons():
    key = create_secret_key()
    verifier = TokenVerifier.from_keys(secret_key=key)
    expired = create_token(subject="a", secret_key=key, expires_in=timedelta(seconds=-1))
    cases = {
        expired: "Token expired",
        create_token(subject="a", secret_key=create_secret_key()): "Token signature is not valid",
        "not-a-token": "Malformed token",
    }
    for token, reason in cases.items():
        with pytest.raises(Unauthorized) as caught:
            verifier.role(token)
        assert caught.value.reason == reason
