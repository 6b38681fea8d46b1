"""Response headers beyond Django's SecurityMiddleware: Permissions-Policy, and the
Content-Security-Policy of django-csp with this host's WebSocket origin."""

from __future__ import annotations

import ipaddress
from typing import Any

from asgiref.sync import iscoroutinefunction
from csp.constants import HEADER, HEADER_REPORT_ONLY
from csp.middleware import CheckableLazyObject
from csp.middleware import CSPMiddleware as BaseCSPMiddleware
from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.http import HttpResponse
from django.utils.decorators import sync_and_async_middleware


@sync_and_async_middleware
def permissions_policy_middleware(get_response):
    """Deny browser features no page uses (camera, microphone, geolocation...)."""

    def add(response):
        if settings.PERMISSIONS_POLICY:
            response.headers.setdefault("Permissions-Policy", settings.PERMISSIONS_POLICY)
        return response

    if iscoroutinefunction(get_response):

        async def middleware(request):
            return add(await get_response(request))

    else:

        def middleware(request):
            return add(get_response(request))

    return middleware


# What a view may set on its response for django-csp: its own policy, or an exemption.
_RESPONSE_POLICY_ATTRS = tuple(
    f"_csp_{name}{ro}" for name in ("config", "update", "replace", "exempt") for ro in ("", "_ro")
)
_MAX_BUILT = 64


class CSPMiddleware(BaseCSPMiddleware):
    """django-csp's middleware, with this host's WebSocket origin in `connect-src`.

    `'self'` covers ws:/wss: only in browsers that implement CSP 3 fully; naming the
    host keeps live updates working everywhere without allowing other hosts.

    A response with no policy of its own, to a request that used no nonce, gets the
    headers built for its scheme and host before, instead of building them again (a
    few hundred microseconds per response); anything else is built as django-csp does.
    """

    # (scheme, host, path excluded or not) -> the CSP headers such a response gets.
    _built: dict[tuple[str, str, tuple[bool, bool]], dict[str, str]] = {}

    def process_response(self, request, response):
        if (
            settings.DEBUG
            or getattr(request, "_csp_nonce", None) is not None
            or any(hasattr(response, attr) for attr in _RESPONSE_POLICY_ATTRS)
            or HEADER in response
            or HEADER_REPORT_ONLY in response
        ):
            return super().process_response(request, response)
        try:
            host = request.get_host()
        except DisallowedHost:
            return super().process_response(request, response)
        key = (request.scheme, host, _excluded(request.path_info))
        headers = self._built.get(key)
        if headers is None:
            blank = super().process_response(request, HttpResponse())
            headers = {name: blank[name] for name in (HEADER, HEADER_REPORT_ONLY) if name in blank}
            if len(self._built) >= _MAX_BUILT:
                self._built.clear()
            self._built[key] = headers
        else:
            request.csp_nonce = CheckableLazyObject(self._csp_nonce_post_response)
        for name, value in headers.items():
            response[name] = value
        return response

    def get_policy_parts(self, request, response, report_only=False):
        parts = super().get_policy_parts(request, response, report_only)
        try:
            host = request.get_host()
        except DisallowedHost:
            return parts
        scheme = "wss" if request.is_secure() else "ws"
        parts.update = {**(parts.update or {}), "connect-src": [f"{scheme}://{host}"]}
        return parts


def _excluded(path: str) -> tuple[bool, bool]:
    """Whether `path` is excluded from the policy and from the report-only one."""
    return tuple(
        path.startswith(
            tuple((getattr(settings, name, None) or {}).get("EXCLUDE_URL_PREFIXES") or ())
        )
        for name in ("CONTENT_SECURITY_POLICY", "CONTENT_SECURITY_POLICY_REPORT_ONLY")
    )


@receiver(setting_changed)
def _forget_built_policies(*, setting: str, **_: Any) -> None:
    if setting.startswith("CONTENT_SECURITY_POLICY") or setting == "DEBUG":
        CSPMiddleware._built.clear()


def client_ip(request) -> str | None:
    """The client address login throttling counts by (django-axes): the peer, or behind
    a trusted proxy the address it vouches for (`ClientAddressMiddleware`)."""
    return request.META.get("REMOTE_ADDR")


# --- the client's address ------------------------------------------------------------


def trusted_networks(
    entries: list[str],
) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """HITL_TRUSTED_PROXIES as networks ("10.0.0.5", "172.16.0.0/12", "::1")."""
    return tuple(ipaddress.ip_network(entry.strip(), strict=False) for entry in entries)


def _ip(value: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    value = value.strip()
    if value.startswith("[") and "]" in value:  # "[::1]:443"
        value = value[1 : value.index("]")]
    elif value.count(":") == 1:  # "203.0.113.7:5100"
        value = value.partition(":")[0]
    try:
        return ipaddress.ip_address(value)
    except ValueError:
        return None


def client_address(peer: str | None, forwarded_for: list[str], trusted) -> str | None:
    """The address a request came from, as far as it can be trusted.

    `peer` is the TCP peer. Only when it is a trusted proxy is X-Forwarded-For read, from
    the right: each trusted proxy vouches for the entry to its left, so the right-most
    entry that is not a trusted proxy is the client. Entries further left were written
    by that client and prove nothing. An entry that is not an address ends the walk at
    the proxy that passed it on.
    """
    here = _ip(peer) if peer else None
    if here is None or not trusted or not any(here in net for net in trusted):
        return peer
    chain = [item for header in forwarded_for for item in header.split(",") if item.strip()]
    for item in reversed(chain):
        address = _ip(item)
        if address is None:
            break
        here = address
        if not any(address in net for net in trusted):
            break
    return str(here)


class ClientAddressMiddleware:
    """ASGI: set `scope["client"]` to `client_address()` for HTTP and WebSocket alike, so
    REMOTE_ADDR, django-axes and the logs all see the same address.

    Replaces daphne's `--proxy-headers`, which believes the left-most X-Forwarded-For
    entry from any peer: a client could name any address, and so dodge the login lockout.
    """

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] in ("http", "websocket") and scope.get("client"):
            trusted = trusted_networks(settings.HITL_TRUSTED_PROXIES)
            if trusted:
                peer, port = scope["client"][0], scope["client"][1]
                forwarded = [
                    value.decode("latin-1")
                    for name, value in scope.get("headers", [])
                    if name.lower() == b"x-forwarded-for"
                ]
                address = client_address(peer, forwarded, trusted)
                if address != peer:
                    scope = {**scope, "client": [address, port]}
        return await self.app(scope, receive, send)
