"""The HTTP client: one request per command, errors turned into one-line messages.

``AdminError`` carries the text to print; the runner prints it on stderr and exits 1, as
``pulsar-admin`` does.  A ``204 No Content`` answer comes back as ``NO_CONTENT`` so the runner
prints nothing, while a JSON ``null`` (a policy that is not set) prints ``null``.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import httpx

from sluice.admin_cli.config import Connection

NO_CONTENT = object()
USER_AGENT = "sluice-admin"


class AdminError(Exception):
    """A failed request, with the message to show the user."""


def segment(value: str) -> str:
    """One URL path segment, escaped.

    ``.`` and ``..`` are escaped too (``%2E``): left as they are, the HTTP client resolves
    them as dot segments, and ``revoke-permission --role ..`` would send ``DELETE`` to the
    namespace itself.  Escaped, the server sees the name and refuses it (412).
    """
    if value in (".", ".."):
        return value.replace(".", "%2E")
    return quote(value, safe="")


def _cause(exc: httpx.TransportError) -> str:
    text = str(exc) or type(exc).__name__
    if "refused" in text.lower():
        return "connection refused"
    return text.splitlines()[0]


def _reason(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("reason"), str):
        return body["reason"]
    if body is not None:
        return json.dumps(body, separators=(",", ":"))
    return response.text.strip() or response.reason_phrase


class AdminClient:
    """Requests against the admin service named by a ``Connection``."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        if connection.token:
            headers["Authorization"] = f"Bearer {connection.token}"
        # Loading the CA bundle costs ~80 ms; plain http never needs it.
        plain = connection.url.lower().startswith("http://")
        self._http = httpx.Client(
            base_url=connection.url,
            headers=headers,
            verify=False if plain else connection.verify,
            timeout=connection.timeout,
        )

    def close(self) -> None:
        """Release the connection pool."""
        self._http.close()

    def download(self, path: str, *, params: dict[str, Any] | None = None) -> bytes:
        """GET a binary answer (a chart); raise ``AdminError`` on failure."""
        query = {k: _param(v) for k, v in (params or {}).items() if v is not None}
        try:
            response = self._http.get(path, params=query)
        except httpx.TransportError as exc:
            raise AdminError(f"cannot reach {self.connection.url}: {_cause(exc)}") from None
        if response.status_code >= 400:
            raise AdminError(f"{_reason(response)} (HTTP {response.status_code})")
        return response.content

    def fetch(
        self, method: str, path: str, *, params: dict[str, Any] | None = None
    ) -> httpx.Response:
        """Send one request and return the response itself (a peeked message: payload and
        headers); raise ``AdminError`` on failure."""
        query = {k: _param(v) for k, v in (params or {}).items() if v is not None}
        try:
            response = self._http.request(method, path, params=query)
        except httpx.TransportError as exc:
            raise AdminError(f"cannot reach {self.connection.url}: {_cause(exc)}") from None
        if response.status_code >= 400:
            raise AdminError(f"{_reason(response)} (HTTP {response.status_code})")
        return response

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: Any = None,
        has_body: bool = False,
    ) -> Any:
        """Send one request; return the decoded answer or raise ``AdminError``."""
        query = {k: _param(v) for k, v in (params or {}).items() if v is not None}
        kwargs: dict[str, Any] = {"params": query}
        if has_body or body is not None:
            kwargs["content"] = json.dumps(body)
            kwargs["headers"] = {"Content-Type": "application/json"}
        url = self.connection.url
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TimeoutException:
            raise AdminError(
                f"timed out after {self.connection.timeout:g} s waiting for {url}"
            ) from None
        except httpx.TransportError as exc:
            raise AdminError(f"cannot reach {url}: {_cause(exc)}") from None
        except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
            raise AdminError(f"invalid admin URL {url}: {exc}") from None
        if response.status_code >= 400:
            raise AdminError(f"{_reason(response)} (HTTP {response.status_code})")
        if response.status_code == 204 or not response.content:
            return NO_CONTENT
        if "json" in response.headers.get("content-type", ""):
            return response.json()
        return response.text.strip()


def _param(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
