"""Response headers beyond Django's SecurityMiddleware: Permissions-Policy, and the
Content-Security-Policy of django-csp with this host's WebSocket origin."""

from __future__ import annotations

from asgiref.sync import iscoroutinefunction
from csp.middleware import CSPMiddleware as BaseCSPMiddleware
from django.conf import settings
from django.core.exceptions import DisallowedHost
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


class CSPMiddleware(BaseCSPMiddleware):
    """django-csp's middleware, with this host's WebSocket origin in `connect-src`.

    `'self'` covers ws:/wss: only in browsers that implement CSP 3 fully; naming the
    host keeps live updates working everywhere without allowing other hosts.
    """

    def get_policy_parts(self, request, response, report_only=False):
        parts = super().get_policy_parts(request, response, report_only)
        try:
            host = request.get_host()
        except DisallowedHost:
            return parts
        scheme = "wss" if request.is_secure() else "ws"
        parts.update = {**(parts.update or {}), "connect-src": [f"{scheme}://{host}"]}
        return parts


def client_ip(request) -> str | None:
    """The client address login throttling counts by (django-axes)."""
    return request.META.get("REMOTE_ADDR")
