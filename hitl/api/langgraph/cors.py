"""CORS for the API clients that run in a browser (a hosted Agent Inbox, CopilotKit).

Only /langgraph/ and /agui/ answer cross-origin requests, only for the origins in
settings.HITL_API_CORS_ORIGINS ("*" allows any), and without credentials: those
clients authenticate with an API token header, never with our session cookie.
"""

from __future__ import annotations

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.http import HttpResponse

PREFIXES = ("/langgraph/", "/agui/")
ALLOW_HEADERS = "authorization, content-type, x-api-key, last-event-id, cache-control, accept"
EXPOSE_HEADERS = "content-location, location, x-pagination-next"


def _origin(request) -> str | None:
    origin = request.headers.get("origin")
    if not origin or not request.path.startswith(PREFIXES):
        return None
    allowed = settings.HITL_API_CORS_ORIGINS
    return origin if ("*" in allowed or origin in allowed) else None


def _preflight(request, origin: str) -> HttpResponse | None:
    if request.method != "OPTIONS" or "access-control-request-method" not in request.headers:
        return None
    response = HttpResponse(status=204)
    response["Access-Control-Allow-Methods"] = "GET, POST, PATCH, DELETE, OPTIONS"
    response["Access-Control-Allow-Headers"] = ALLOW_HEADERS
    response["Access-Control-Max-Age"] = "600"
    return response


def _decorate(response, origin: str):
    response["Access-Control-Allow-Origin"] = origin
    response["Access-Control-Expose-Headers"] = EXPOSE_HEADERS
    response["Vary"] = ", ".join(filter(None, [response.get("Vary"), "Origin"]))
    return response


class ApiCorsMiddleware:
    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request):
        if iscoroutinefunction(self):
            return self.__acall__(request)
        origin = _origin(request)
        if origin is None:
            return self.get_response(request)
        return _decorate(_preflight(request, origin) or self.get_response(request), origin)

    async def __acall__(self, request):
        origin = _origin(request)
        if origin is None:
            return await self.get_response(request)
        response = _preflight(request, origin) or await self.get_response(request)
        return _decorate(response, origin)
