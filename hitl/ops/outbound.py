"""One outbound HTTP POST through the webhook guard: run webhooks and Slack both send with it.

The URL is checked (allow-listed host and port, vetted address) and the POST goes to the
address the host resolved to when it was checked (never a second lookup); redirects are
not followed, so a 3xx is the caller's failed attempt.
"""

from __future__ import annotations

import http.client
import socket
import ssl
from urllib.parse import urlsplit

from django.conf import settings

from hitl.core.net.webhook_urls import webhook_resolve


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """Connects to the vetted address while the Host header keeps the URL's name."""

    def __init__(self, host: str, address: str, port: int, timeout: float):
        super().__init__(host, port, timeout=timeout)
        self._address = address

    def connect(self):
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, host: str, address: str, port: int, timeout: float):
        super().__init__(host, port, timeout=timeout, context=ssl.create_default_context())
        self._address = address

    def connect(self):
        sock = socket.create_connection((self._address, self.port), self.timeout)
        # The certificate is checked against the URL's host name, not the address.
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


def guarded_post(url: str, body: bytes, headers: dict[str, str]) -> int:
    """POST once to the resolved, allowed address; return the status (no redirects)."""
    address, port = webhook_resolve(url)
    parts = urlsplit(url)
    kind = _PinnedHTTPSConnection if parts.scheme == "https" else _PinnedHTTPConnection
    conn = kind(parts.hostname, address, port, settings.HITL_WEBHOOK_TIMEOUT)
    try:
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        conn.request("POST", target, body=body, headers=headers)
        response = conn.getresponse()
        response.read(65536)
        return response.status
    finally:
        conn.close()
