"""Response headers Django has no setting for (the rest: SecurityMiddleware, django-csp)."""

from __future__ import annotations

from asgiref.sync import iscoroutinefunction
from django.conf import settings
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
