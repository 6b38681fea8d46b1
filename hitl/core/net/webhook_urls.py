"""Which URLs a run may name as its webhook: checked when the run is created, and again
(with the resolved address) before every delivery.

The allow-list (`HITL_WEBHOOK_HOSTS`) names hosts and ports: `hooks.example.com` allows
that host on its scheme's default port (443 for https, 80 for http), `hooks.example.com:8443`
that port, `hooks.example.com:*` any port; `*.example.com` allows subdomains. Addresses
that are loopback, private, link-local, multicast or reserved are refused unless the
operator sets `HITL_WEBHOOK_ALLOW_PRIVATE` (a receiver on the same machine or network).

Remote deployments' URLs (which HITL fetches) go through the same functions under their
own pair of settings, `HITL_REMOTE_HOSTS` and `HITL_REMOTE_ALLOW_PRIVATE` (`DEPLOYMENTS`).
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

from django.conf import settings

DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class UrlPolicy:
    """Whose URLs these are, and the two settings that govern them."""

    what: str
    hosts_setting: str
    private_setting: str

    @property
    def hosts(self) -> list[str]:
        return list(getattr(settings, self.hosts_setting))

    @property
    def allow_private(self) -> bool:
        return bool(getattr(settings, self.private_setting))


WEBHOOKS = UrlPolicy("Webhook", "HITL_WEBHOOK_HOSTS", "HITL_WEBHOOK_ALLOW_PRIVATE")
DEPLOYMENTS = UrlPolicy("Deployment", "HITL_REMOTE_HOSTS", "HITL_REMOTE_ALLOW_PRIVATE")


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


def _port(parts: SplitResult, policy: UrlPolicy = WEBHOOKS) -> int:
    try:
        port = parts.port
    except ValueError:
        raise WebhookNotAllowed(f"A {policy.what.lower()} URL has an invalid port.") from None
    return port or DEFAULT_PORTS[parts.scheme]


def address_allowed(address: str, policy: UrlPolicy = WEBHOOKS) -> bool:
    """False for loopback, private, link-local, multicast, reserved or unspecified
    addresses (IPv4-mapped IPv6 included), unless the policy's private setting is on."""
    if policy.allow_private:
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


def webhook_check_url(url: str, policy: UrlPolicy = WEBHOOKS) -> str:
    """Return the URL if it may be called; raise WebhookNotAllowed otherwise."""
    what, lower = policy.what, policy.what.lower()
    if not isinstance(url, str) or len(url) > 500:
        raise WebhookNotAllowed(f"A {lower} must be an http(s) URL of at most 500 characters.")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise WebhookNotAllowed(f"A {lower} must be an http(s) URL.")
    if parts.username or parts.password:
        raise WebhookNotAllowed(f"A {lower} URL must not carry credentials.")
    host, port = parts.hostname.lower(), _port(parts, policy)
    host_listed = False
    for allowed in policy.hosts:
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
                return url  # a name: its addresses are checked before each call
            if not address_allowed(str(literal), policy):
                raise WebhookNotAllowed(_private_message(host, policy))
            return url
    if host_listed:
        raise WebhookNotAllowed(
            f"{what} port {port} of {host!r} is not allowed (settings.{policy.hosts_setting} "
            f"names host:port; a host alone allows port {DEFAULT_PORTS[parts.scheme]})."
        )
    raise WebhookNotAllowed(
        f"{what} host {host!r} is not allowed (settings.{policy.hosts_setting})."
    )


def _private_message(host: str, policy: UrlPolicy = WEBHOOKS) -> str:
    return (
        f"{policy.what} host {host!r} is a loopback, private or link-local address; "
        f"set {policy.private_setting}=1 to allow it."
    )


def webhook_resolve(url: str, policy: UrlPolicy = WEBHOOKS) -> tuple[str, int]:
    """Check `url` and resolve its host: (an allowed address, port) to connect to.

    The caller connects to exactly this address, so a name that resolves differently
    a moment later (DNS rebinding) cannot redirect the delivery.
    """
    webhook_check_url(url, policy)
    parts = urlsplit(url)
    port = _port(parts, policy)
    try:
        infos = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise WebhookNotAllowed(
            f"{policy.what} host {parts.hostname!r} does not resolve: {exc}"
        ) from None
    addresses = [info[4][0] for info in infos]
    if not addresses:
        raise WebhookNotAllowed(f"{policy.what} host {parts.hostname!r} does not resolve.")
    refused = [a for a in addresses if not address_allowed(a, policy)]
    if refused:
        # Every address must be allowed: one bad one is enough to pick it next time.
        raise WebhookNotAllowed(_private_message(f"{parts.hostname} ({refused[0]})", policy))
    return addresses[0], port
