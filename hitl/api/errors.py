"""The JSON error contract shared by every HTTP API: {"detail": "..."} with a 4xx (or 5xx).

Every body and query string is decoded by `BoundedParser`: a bad value (NUL, a lone
surrogate, deeper than `MAX_JSON_DEPTH`) is a 400 naming the field, on SQLite as on
PostgreSQL, before any view or database sees it.
"""

from __future__ import annotations

import logging

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest
from django.utils.datastructures import MultiValueDict
from ninja import NinjaAPI, Schema
from ninja.errors import AuthenticationError, HttpError
from ninja.parser import Parser

from hitl.core import errors
from hitl.core.errors import ServiceError, check_json, is_transient, load_json

logger = logging.getLogger(__name__)


class Error(Schema):
    detail: str


ERRORS = {400: Error, 401: Error, 403: Error, 404: Error, 409: Error, 413: Error}


class BoundedParser(Parser):
    """ninja's parser, bounded and checked (`hitl.core.errors.load_json`)."""

    def parse_body(self, request: HttpRequest):
        return load_json(request.body, "body")

    def parse_querydict(self, data: MultiValueDict, list_fields: list[str], request: HttpRequest):
        source = "form field" if data is request.POST else "query parameter"
        for key, values in data.lists():
            check_json(key, f"A {source} name")
            for value in values:
                if isinstance(value, str):
                    check_json(value, f"{source} {key}")
        return super().parse_querydict(data, list_fields, request)


def install_error_handlers(api: NinjaAPI, *, auth_hint: str) -> None:
    """Map service errors, oversized bodies, missing credentials and any other failure to
    JSON answers: a client of a JSON API never gets an HTML page."""

    def service_error(request, exc: errors.ServiceError):
        return api.create_response(request, {"detail": exc.message}, status=exc.status_code)

    def http_error(request, exc: HttpError):
        # ninja wraps what the parser raised ("Cannot parse request body"): say what it was.
        cause = exc.__cause__
        if isinstance(cause, ServiceError):
            return service_error(request, cause)
        return api.create_response(request, {"detail": str(exc)}, status=exc.status_code)

    def too_big(request, exc):
        return api.create_response(request, {"detail": "Request body too large."}, status=413)

    def unauthenticated(request, exc):
        return api.create_response(
            request, {"detail": f"Authentication required: {auth_hint}"}, status=401
        )

    def unexpected(request, exc: Exception):
        if is_transient(exc):
            raise exc  # hitl.outage answers it: 503 + Retry-After
        logger.exception("Unhandled error in %s %s", request.method, request.path)
        return api.create_response(
            request, {"detail": "Internal server error; it has been logged."}, status=500
        )

    api.add_exception_handler(errors.ServiceError, service_error)
    api.add_exception_handler(HttpError, http_error)
    api.add_exception_handler(RequestDataTooBig, too_big)
    api.add_exception_handler(AuthenticationError, unauthenticated)
    api.add_exception_handler(Exception, unexpected)
