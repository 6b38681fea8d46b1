"""Honest answers while the database, Redis or the broker is unreachable: 503 + Retry-After.

A transient infrastructure fault is never a 500. JSON APIs get {"detail": ...}; pages
get a small self-contained page (no database needed to render it) that reloads itself.
"""

from __future__ import annotations

import json
import sys

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponse
from django.views.defaults import server_error

from hitl.core.errors import is_transient

RETRY_AFTER_SECONDS = 2
API_PREFIXES = ("/api/", "/langgraph/", "/agui/")
DETAIL = "The service is briefly unavailable (database or queue unreachable); try again shortly."

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>HITL is reconnecting</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="refresh" content="{seconds}">
<style>body{{font:16px system-ui,sans-serif;margin:0;background:#f6f7f9;color:#222}}
.banner{{margin:15vh auto;max-width:34rem;padding:1.5rem;border-radius:.5rem;background:#fff8e1;
border:1px solid #f0c36d}}h1{{font-size:1.25rem;margin:0 0 .5rem}}</style></head>
<body><div class="banner" role="alert"><h1>HITL is reconnecting</h1>
<p>The server can't reach its database or queue right now. Nothing you sent was lost:
decisions are saved before they are confirmed. This page tries again in {seconds} seconds.</p>
</div></body></html>"""


def unavailable_response(request: HttpRequest) -> HttpResponse:
    if request.path.startswith(API_PREFIXES) or "application/json" in request.headers.get(
        "Accept", ""
    ):
        response = HttpResponse(
            json.dumps({"detail": DETAIL}), status=503, content_type="application/json"
        )
    else:
        response = HttpResponse(PAGE.format(seconds=RETRY_AFTER_SECONDS), status=503)
    return with_retry_after(response)


def with_retry_after(response: HttpResponse) -> HttpResponse:
    """A 503 says when to try again, and is not cached."""
    if response.status_code == 503 and not response.has_header("Retry-After"):
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        response["Cache-Control"] = "no-store"
    return response


def server_error_json(request: HttpRequest) -> HttpResponse:
    return HttpResponse(
        json.dumps({"detail": "Internal server error; it has been logged."}),
        status=500,
        content_type="application/json",
    )


class OutageMiddleware:
    """Turn a transient fault raised by a view (sync or async) into a 503.

    A view may also answer 503 itself (a `hitl.core.errors.Unavailable` its error
    handler turned into JSON): every 503 tells the client when to try again. Written
    for both modes, so under ASGI it costs no hop to the sync thread (hitl/middleware.py).
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self.is_async:
            return self._acall(request)
        return with_retry_after(self.get_response(request))

    async def _acall(self, request):
        return with_retry_after(await self.get_response(request))

    def process_exception(self, request, exception):
        return unavailable_response(request) if is_transient(exception) else None


def handler500(request: HttpRequest) -> HttpResponse:
    """Faults outside views (session saving, middleware) reach here: 503 if transient.

    The JSON APIs answer JSON even then: their clients never parse an HTML page.
    """
    if is_transient(sys.exc_info()[1]):
        return unavailable_response(request)
    if request.path.startswith(API_PREFIXES):
        return server_error_json(request)
    return server_error(request)
