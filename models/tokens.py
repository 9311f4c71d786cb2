"""JSON Web Tokens as Pulsar's token authentication uses them: create, inspect, verify.

A token is a JWT whose ``sub`` claim is the caller's role.  It is signed either with a secret
key (HMAC, ``HS256`` by default) or with a private key (``RS256`` by default, or ``ES256``),
in which case the server verifies it with the matching public key.  An ``exp`` claim is
optional; a token without one never expires.

Keys are given the way Pulsar takes them: ``file:PATH`` (also ``file://PATH``) reads a file,
``data:;base64,XXXX`` decodes inline base64, anything else is the key text itself.  Key files
may hold PEM or DER (Pulsar's own tools write DER).

Pure functions only: no HTTP, no settings.  Failures raise ``Unauthorized`` (for a token
that does not verify) or ``InvalidInput`` (for an unusable key or duration).
"""

from __future__ import annotations

import base64
import re
import secrets
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from models.errors import InvalidInput, Unauthorized

HMAC_ALGORITHMS = ("HS256", "HS384", "HS512")
RSA_ALGORITHMS = ("RS256", "RS384", "RS512")
EC_ALGORITHMS = ("ES256", "ES384", "ES512")
# Bytes of random secret per HMAC algorithm (the digest size, as JWA recommends).
SECRET_SIZES = {"HS256": 32, "HS384": 48, "HS512": 64}
EC_CURVES: dict[str, type[ec.EllipticCurve]] = {
    "ES256": ec.SECP256R1,
    "ES384": ec.SECP384R1,
    "ES512": ec.SECP521R1,
}
# Units of --expiry-time, as Pulsar's RelativeTimeUtil reads them.
DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800, "y": 31_536_000}
_DURATION = re.compile(r"^\s*(\d+)\s*([smhdwy]?)\s*$")
DATA_BASE64 = "data:;base64,"


def read_key(spec: str) -> bytes:
    """The key bytes named by ``file:PATH``, ``data:;base64,...`` or given inline."""
    if spec.startswith("file:"):
        path = spec[len("file:") :]
        if path.startswith("//"):
            path = path[2:]
        try:
            return Path(path).read_bytes()
        except OSError as exc:
            raise InvalidInput(f"Cannot read key file {path}: {exc.strerror}") from None
    if spec.startswith(DATA_BASE64):
        try:
            return base64.b64decode(spec[len(DATA_BASE64) :], validate=True)
        except ValueError:
            raise InvalidInput("Key after data:;base64, is not valid base64") from None
    if spec.startswith("data:"):
        return spec[len("data:") :].lstrip(",").encode()
    return spec.encode()


def parse_duration(text: str) -> timedelta:
    """``10s``, ``5m``, ``2h``, ``1d``, ``1w``, ``1y`` (a bare number is seconds)."""
    match = _DURATION.match(text)
    if match is None:
        raise InvalidInput(f"Invalid duration {text!r}: use a number and one of s m h d w y")
    return timedelta(seconds=int(match.group(1)) * DURATION_UNITS[match.group(2) or "s"])


def create_secret_key(algorithm: str = "HS256") -> bytes:
    """A fresh random secret for an HMAC algorithm."""
    if algorithm not in SECRET_SIZES:
        raise InvalidInput(f"Unsupported secret-key algorithm {algorithm}: use HS256/384/512")
    return secrets.token_bytes(SECRET_SIZES[algorithm])


def create_key_pair(algorithm: str = "RS256") -> tuple[bytes, bytes]:
    """A fresh (private key, public key) pair in PEM (PKCS#8 and SubjectPublicKeyInfo)."""
    private: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
    if algorithm in RSA_ALGORITHMS:
        private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    elif algorithm in EC_ALGORITHMS:
        private = ec.generate_private_key(EC_CURVES[algorithm]())
    else:
        raise InvalidInput(f"Unsupported key-pair algorithm {algorithm}: use RS* or ES*")
    private_pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private_pem, public_pem


def _is_pem(data: bytes) -> bool:
    return data.lstrip().startswith(b"-----BEGIN")


def load_private_key(data: bytes) -> Any:
    """A private key from PEM or DER bytes."""
    try:
        if _is_pem(data):
            return serialization.load_pem_private_key(data, password=None)
        return serialization.load_der_private_key(data, password=None)
    except (ValueError, TypeError):
        raise InvalidInput("Private key is not a PEM or DER key without password") from None


def load_public_key(data: bytes) -> Any:
    """A public key from PEM or DER bytes."""
    try:
        if _is_pem(data):
            return serialization.load_pem_public_key(data)
        return serialization.load_der_public_key(data)
    except (ValueError, TypeError):
        raise InvalidInput("Public key is not a PEM or DER public key") from None


def algorithms_for_public_key(key: Any) -> tuple[str, ...]:
    """The signature algorithms a public (or private) key can verify (or make)."""
    if isinstance(key, rsa.RSAPublicKey | rsa.RSAPrivateKey):
        return RSA_ALGORITHMS
    if isinstance(key, ec.EllipticCurvePublicKey | ec.EllipticCurvePrivateKey):
        return EC_ALGORITHMS
    raise InvalidInput("Only RSA and EC keys are supported")


def create_token(
    *,
    subject: str,
    secret_key: bytes | None = None,
    private_key: bytes | None = None,
    algorithm: str | None = None,
    expires_in: timedelta | None = None,
    headers: dict[str, Any] | None = None,
) -> str:
    """A signed token for ``subject``; exactly one of ``secret_key`` or ``private_key``."""
    if (secret_key is None) == (private_key is None):
        raise InvalidInput("Give exactly one of a secret key or a private key")
    if not subject:
        raise InvalidInput("The subject (role) must not be empty")
    claims: dict[str, Any] = {"sub": subject}
    if expires_in is not None:
        claims["exp"] = int(time.time() + expires_in.total_seconds())
    if secret_key is not None:
        algorithm = algorithm or "HS256"
        if algorithm not in HMAC_ALGORITHMS:
            raise InvalidInput(f"A secret key signs with HS256/384/512, not {algorithm}")
        try:
            return jwt.encode(claims, secret_key, algorithm=algorithm, headers=headers)
        except jwt.InvalidKeyError:
            raise InvalidInput("This secret key looks like a PEM key: use a private key") from None
    key = load_private_key(private_key)  # type: ignore[arg-type]
    allowed = algorithms_for_public_key(key)
    algorithm = algorithm or allowed[0]
    if algorithm not in allowed:
        raise InvalidInput(f"This private key signs with {'/'.join(allowed)}, not {algorithm}")
    return jwt.encode(claims, key, algorithm=algorithm, headers=headers)


def show_token(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The (header, claims) of a token, without checking its signature."""
    try:
        header = jwt.get_unverified_header(token)
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError as exc:
        raise InvalidInput(f"Malformed token: {exc}") from None
    return header, claims


@dataclass(frozen=True)
class TokenVerifier:
    """Checks tokens against a secret key or a public key; returns the role claim."""

    key: Any
    algorithms: tuple[str, ...]
    role_claim: str = "sub"

    @classmethod
    def from_keys(
        cls,
        *,
        secret_key: bytes | None = None,
        public_key: bytes | None = None,
        role_claim: str = "sub",
    ) -> TokenVerifier:
        """A verifier for exactly one of a secret key or a public key."""
        if (secret_key is None) == (public_key is None):
            raise InvalidInput("Configure exactly one of a token secret key or public key")
        if secret_key is not None:
            if not secret_key:
                raise InvalidInput("The token secret key is empty")
            return cls(secret_key, HMAC_ALGORITHMS, role_claim)
        key = load_public_key(public_key)  # type: ignore[arg-type]
        return cls(key, algorithms_for_public_key(key), role_claim)

    def role(self, token: str) -> str:
        """The role of a valid token; ``Unauthorized`` with the reason otherwise."""
        return self.verify(token)[0]

    def verify(self, token: str) -> tuple[str, float | None]:
        """The role of a valid token and when it expires (``exp``, seconds since the epoch;
        None when it does not); ``Unauthorized`` with the reason otherwise."""
        try:
            claims = jwt.decode(
                token,
                self.key,
                algorithms=list(self.algorithms),
                options={"require": [self.role_claim], "verify_aud": False},
            )
        except jwt.ExpiredSignatureError:
            raise Unauthorized("Token expired") from None
        except jwt.InvalidSignatureError:
            raise Unauthorized("Token signature is not valid") from None
        except jwt.InvalidAlgorithmError:
            raise Unauthorized("Token algorithm not accepted by this server") from None
        except jwt.MissingRequiredClaimError:
            raise Unauthorized(f"Token has no {self.role_claim} claim") from None
        except jwt.PyJWTError:
            raise Unauthorized("Malformed token") from None
        role = claims[self.role_claim]
        if not isinstance(role, str) or not role:
            raise Unauthorized(f"Token {self.role_claim} claim is not a role name")
        expires = claims.get("exp")
        return role, float(expires) if isinstance(expires, int | float) else None
