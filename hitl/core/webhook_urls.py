"""Which URLs a run may name as its webhook: checked when the run is created."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings


class WebhookNotAllowed(ValueError):
    """A webhook URL that is malformed or whose host is not allow-listed."""


def webhook_check_url(url: str) -> str:
    """Return the URL if it may receive webhooks; raise WebhookNotAllowed otherwise."""
    if not isinstance(url, str) or len(url) > 500:
        raise WebhookNotAllowed("A webhook must be an http(s) URL of at most 500 characters.")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise WebhookNotAllowed("A webhook must be an http(s) URL.")
    if parts.username or parts.password:
        raise WebhookNotAllowed("A webhook URL must not carry credentials.")
    host = parts.hostname.lower()
    for allowed in settings.HITL_WEBHOOK_HOSTS:
        allowed = allowed.lower()
        if host == allowed or (allowed.startswith("*.") and host.endswith(allowed[1:])):
            return url
    raise WebhookNotAllowed(f"Webhook host {host!r} is not allowed (settings.HITL_WEBHOOK_HOSTS).")
