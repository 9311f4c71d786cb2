"""A client's data-plane session: its token traded at the admin service for Redis credentials.

``sluice.Client("http://sluice-api:8080", authentication=sluice.AuthenticationToken(token))``
asks the admin service (``POST /admin/v2/dataplane/sessions``) where Redis is and, with
authentication on, for a Redis user of its own whose ACL allows exactly what the token's role
was granted.  The session lasts a few minutes; the client renews it with its token at
half-life (a token supplier is asked again each time, so a refreshed token keeps the session
going), and closes it when the client closes.  Topics the registry does not list yet are
looked up (and created on first use) through the admin service, which checks the role's
grants: a session user may read the topic registry, not write it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx
from redis.commands.core import Script
from redis.exceptions import NoScriptError

from sluice.errors import (
    AuthenticationError,
    AuthorizationError,
    ConnectError,
    NamespaceNotFound,
    NotAllowedError,
    SluiceException,
    TopicNotFound,
)
from sluice.protocol.names import TopicName
from sluice.refusals import denied

log = logging.getLogger(__name__)

PREFIX = "/admin/v2/dataplane"


class AuthenticationToken:
    """Pulsar's ``AuthenticationToken``: a token, or a function that returns the current one."""

    def __init__(self, token: str | Callable[[], str]) -> None:
        """``token`` is the JWT text or a callable returning it (asked on every use)."""
        if not callable(token) and not (isinstance(token, str) and token.strip()):
            raise AuthenticationError("AuthenticationToken needs a token or a token supplier")
        self._token = token

    def token(self) -> str:
        """The token to present now."""
        value = self._token() if callable(self._token) else self._token
        return value.strip()


@dataclass(frozen=True)
class Credentials:
    """Where Redis is and as whom to connect (``username`` None: no ACL user)."""

    service_url: str
    username: str | None
    password: str | None
    expires_ms: int | None
    renew_after: float | None


def _reason(response: httpx.Response) -> str:
    try:
        body: Any = response.json()
        return str(body.get("reason", body)) if isinstance(body, dict) else str(body)
    except ValueError:
        return response.text or response.reason_phrase


class Session:
    """One client's session with the admin service at ``api_url``."""

    def __init__(
        self,
        api_url: str,
        authentication: AuthenticationToken | None,
        timeout: float = 10.0,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self.authentication = authentication
        self._http = httpx.Client(base_url=self.api_url, timeout=timeout)
        self.user: str | None = None

    def _headers(self) -> dict[str, str]:
        if self.authentication is None:
            return {}
        return {"Authorization": f"Bearer {self.authentication.token()}"}

    def _request(self, method: str, path: str) -> httpx.Response:
        try:
            response = self._http.request(method, PREFIX + path, headers=self._headers())
        except httpx.HTTPError as exc:
            raise ConnectError(f"cannot reach the admin service at {self.api_url}: {exc}") from None
        if response.status_code == 401:
            raise AuthenticationError(f"the admin service refused the token: {_reason(response)}")
        return response

    def open(self) -> Credentials:
        """A new session (credentials included)."""
        response = self._request("POST", "/sessions")
        if response.status_code != 201:
            raise ConnectError(
                f"the admin service at {self.api_url} gave no data-plane session "
                f"({response.status_code}: {_reason(response)})"
            )
        body = response.json()
        self.user = body.get("username")
        return Credentials(
            body["serviceUrl"],
            self.user,
            body.get("password"),
            body.get("expiresAt"),
            body.get("renewAfterSeconds"),
        )

    def renew(self) -> float | None:
        """Extend the session (and have the admin service load the data-plane scripts); when
        to renew next, in seconds."""
        if self.user is None:
            return None
        response = self._request("POST", f"/sessions/{self.user}")
        if response.status_code == 404:
            raise AuthenticationError(f"the data-plane session has ended: {_reason(response)}")
        if response.status_code != 200:
            raise SluiceException(f"session not renewed: {_reason(response)}")
        return response.json().get("renewAfterSeconds")

    def partitions(
        self, topic: TopicName, action: str | None = None, subscription: str | None = None
    ) -> int:
        """The partition count of ``topic`` (0: non-partitioned), created on first use;
        ``action`` (``produce``, ``consume``) is what a refusal names.  With
        ``subscription``, the admin service also checks that the role may subscribe with
        that name (its namespace's subscription permissions)."""
        base = topic.base
        path = f"/partitions/persistent/{base.tenant}/{base.namespace}/{base.local}"
        if subscription is not None:
            path += "?" + urlencode({"subscription": subscription})
        response = self._request("GET", path)
        reason = _reason(response)
        if response.status_code == 403:
            if subscription is not None:
                raise AuthorizationError(reason)
            if action is None:
                raise AuthorizationError(f"Not authorized to use {topic.full}: {reason}")
            raise denied(topic.full, action, reason)
        if response.status_code == 404:
            if reason.startswith("Namespace"):
                raise NamespaceNotFound(reason)
            raise TopicNotFound(reason)
        if response.status_code == 412:
            raise NotAllowedError(reason)
        if response.status_code != 200:
            raise SluiceException(f"lookup of {topic.full} failed: {reason}")
        return int(response.json()["partitions"])

    def close(self) -> None:
        """End the session (its Redis connections are closed by Redis) and the HTTP client."""
        try:
            if self.user is not None:
                self._request("DELETE", f"/sessions/{self.user}")
        except SluiceException as exc:
            log.debug("session not closed: %s", exc)
        finally:
            self.user = None
            self._http.close()


class SessionScript(Script):
    """A data-plane script called by a session user, who may not load scripts: when Redis
    has forgotten it (a restart), the admin service loads it again (``reload``) and the call
    is retried once."""

    def __init__(self, registered_client: Any, script: str, reload: Callable[[], None]) -> None:
        super().__init__(registered_client, script)
        self._reload = reload

    def __call__(self, keys: Any = None, args: Any = None, client: Any = None) -> Any:
        keys, args = list(keys or []), list(args or [])
        if client is not None and client is not self.registered_client:
            # Queued on a pipeline without redis-py's loading before it runs (which a session
            # may not do): a missing script fails its call with NoScriptError, and the caller
            # asks for a reload (``Client.reload_scripts``) and tries again.
            return client.evalsha(self.sha, len(keys), *keys, *args)
        try:
            return self.registered_client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            self._reload()
            return self.registered_client.evalsha(self.sha, len(keys), *keys, *args)
