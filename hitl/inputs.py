"""Refuse bad query strings and form fields for every page: a 400 naming the field.

The JSON APIs check their bodies and parameters in `hitl.api.errors.BoundedParser`;
this middleware covers everything else (pages, admin, the login form), so a NUL in
`?status=` or in a form field never reaches a database that would refuse it with a 500.
"""

from __future__ import annotations

import json

from asgiref.sync import iscoroutinefunction
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.utils.decorators import sync_and_async_middleware

from hitl.core.errors import (
    Invalid,
    check_json,
    form_body_errors,
    form_body_message,
    multipart_boundary_problem,
)
from hitl.outage import API_PREFIXES


def _check(data, source: str) -> None:
    for key, values in data.lists():
        check_json(key, f"A {source} name")
        for value in values:
            check_json(value, f"{source} {key}")


def bad_input_response(request: HttpRequest, message: str) -> HttpResponse:
    if request.path.startswith(API_PREFIXES):
        return HttpResponse(
            json.dumps({"detail": message}), status=400, content_type="application/json"
        )
    return HttpResponseBadRequest(message, content_type="text/plain; charset=utf-8")


FORM = "application/x-www-form-urlencoded"
# Endpoints whose callers only ever send form-encoded bodies (Slack's interactivity):
# anything else is refused before CSRF or a view would try to parse it.
FORM_ONLY_PATHS = frozenset({"/slack/interactivity/"})


@sync_and_async_middleware
def bounded_input_middleware(get_response):
    """Check the query string of every request, the fields of urlencoded form posts and
    the boundary of multipart bodies.

    Pure CPU (the body is already read), so the async path checks inline, no thread hop.
    """

    def refusal(request: HttpRequest) -> HttpResponse | None:
        try:
            _check(request.GET, "query parameter")
            # Multipart bodies are left to their views (uploads stream to disk); their
            # text fields go through Django forms, which refuse NUL themselves.
            if request.content_type == "multipart/form-data":
                problem = multipart_boundary_problem(request.META.get("CONTENT_TYPE", ""))
                if problem:
                    raise Invalid(problem)
            if request.path in FORM_ONLY_PATHS and request.content_type != FORM:
                try:  # say what is wrong with the body, when something is
                    request.POST  # noqa: B018
                except form_body_errors() as exc:
                    raise Invalid(form_body_message(exc)) from None
                raise Invalid("This endpoint takes a form-encoded body.")
            if request.method == "POST" and request.content_type == (
                "application/x-www-form-urlencoded"
            ):
                _check(request.POST, "form field")
        except Invalid as exc:
            return bad_input_response(request, exc.message)
        return None

    if iscoroutinefunction(get_response):

        async def middleware(request):
            return refusal(request) or await get_response(request)

    else:

        def middleware(request):
            return refusal(request) or get_response(request)

    return middleware


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """handler400: a body Django could not parse says why (JSON on the APIs); any other
    400 is Django's own page."""
    if isinstance(exception, form_body_errors()):
        return bad_input_response(request, form_body_message(exception))
    from django.views.defaults import bad_request as default

    return default(request, exception)
