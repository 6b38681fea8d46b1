"""Which URLs a run may name as its webhook: checked when the run is created, and again
(with the resolved address) before every delivery.

The allow-list (`HITL_WEBHOOK_HOSTS`) names hosts and ports: `hooks.example.com` allows
that host on its scheme's default port (443 for https, 80 for http), `hooks.example.com:8443`
that port, `hooks.example.com:*` any port; `*.example.com` allows subdomains. Addresses
that are loopback, private, link-local, multicast or reserved are refused unless the
operator sets `HITL_WEBHOOK_ALLOW_PRIVATE` (a receiver on the same machine or network).
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import SplitResult, urlsplit

from django.conf import settings

DEFAULT_PORTS = {"http": 80, "https": 443}


class WebhookNotAllowed(ValueError):
    """A webhook URL that is malformed or whose host, port or address is not allowed."""


def _entry(entry: str) -> tuple[str, str | None]:
    """An allow-list entry -> (host, port or "*" or None for the scheme's default)."""
    entry = entry.strip().lower()
    if entry.startswith("["):  # [v6]:port
        host, _, rest = entry[1:].partition("]")
        return host, rest[1:] if rest.startswith(":") else None
    host, sep, port = entry.rpartition(":")
    if sep and ":" not in host and (port == "*" or port.isdigit()):
        return host, port
    return entry, None


def _port(parts: SplitResult) -> int:
    try:
        port = parts.port
    except ValueError:
        raise WebhookNotAllowed("A webhook URL has an invalid port.") from None
    return port or DEFAULT_PORTS[parts.scheme]


def address_allowed(address: str) -> bool:
    """False for loopback, private, link-local, multicast, reserved or unspecified
    addresses (IPv4-mapped IPv6 included), unless HITL_WEBHOOK_ALLOW_PRIVATE is set."""
    if settings.HITL_WEBHOOK_ALLOW_PRIVATE:
        return True
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not (
        ip.is_loopback
        or ip.is_private
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
    )


def webhook_check_url(url: str) -> str:
    """Return the URL if it may receive webhooks; raise WebhookNotAllowed otherwise."""
    if not isinstance(url, str) or len(url) > 500:
        raise WebhookNotAllowed("A webhook must be an http(s) URL of at most 500 characters.")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise WebhookNotAllowed("A webhook must be an http(s) URL.")
    if parts.username or parts.password:
        raise WebhookNotAllowed("A webhook URL must not carry credentials.")
    host, port = parts.hostname.lower(), _port(parts)
    host_listed = False
    for allowed in settings.HITL_WEBHOOK_HOSTS:
        allowed_host, allowed_port = _entry(allowed)
        if not (
            host == allowed_host
            or (allowed_host.startswith("*.") and host.endswith(allowed_host[1:]))
        ):
            continue
        host_listed = True
        if allowed_port == "*" or int(allowed_port or DEFAULT_PORTS[parts.scheme]) == port:
            try:
                literal = ipaddress.ip_address(host)
            except ValueError:
                return url  # a name: its addresses are checked before each delivery
            if not address_allowed(str(literal)):
                raise WebhookNotAllowed(_private_message(host))
            return url
    if host_listed:
        raise WebhookNotAllowed(
            f"Webhook port {port} of {host!r} is not allowed (settings.HITL_WEBHOOK_HOSTS "
            f"names host:port; a host alone allows port {DEFAULT_PORTS[parts.scheme]})."
        )
    raise WebhookNotAllowed(f"Webhook host {host!r} is not allowed (settings.HITL_WEBHOOK_HOSTS).")


def _private_message(host: str) -> str:
    return (
        f"Webhook host {host!r} is a loopback, private or link-local address; "
        "set HITL_WEBHOOK_ALLOW_PRIVATE=1 to deliver there."
    )


def webhook_resolve(url: str) -> tuple[str, int]:
    """Check `url` and resolve its host: (an allowed address, port) to connect to.

    The caller connects to exactly this address, so a name that resolves differently
    a moment later (DNS rebinding) cannot redirect the delivery.
    """
    webhook_check_url(url)
    parts = urlsplit(url)
    port = _port(parts)
    try:
        infos = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise WebhookNotAllowed(
            f"Webhook host {parts.hostname!r} does not resolve: {exc}"
        ) from None
    addresses = [info[4][0] for info in infos]
    if not addresses:
        raise WebhookNotAllowed(f"Webhook host {parts.hostname!r} does not resolve.")
    refused = [a for a in addresses if not address_allowed(a)]
    if refused:
        # Every address must be allowed: one bad one is enough to pick it next time.
        raise WebhookNotAllowed(_private_message(f"{parts.hostname} ({refused[0]})"))
    return addresses[0], port
