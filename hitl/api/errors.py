"""The JSON error contract shared by every HTTP API: {"detail": "..."} with a 4xx."""

from __future__ import annotations

from django.core.exceptions import RequestDataTooBig
from ninja import NinjaAPI, Schema
from ninja.errors import AuthenticationError

from hitl.core import services


class Error(Schema):
    detail: str


ERRORS = {400: Error, 401: Error, 403: Error, 404: Error, 409: Error, 413: Error}


def install_error_handlers(api: NinjaAPI, *, auth_hint: str) -> None:
    """Map service errors, oversized bodies and missing credentials to JSON 4xx answers."""

    def service_error(request, exc: services.ServiceError):
        return api.create_response(request, {"detail": exc.message}, status=exc.status_code)

    def too_big(request, exc):
        return api.create_response(request, {"detail": "Request body too large."}, status=413)

    def unauthenticated(request, exc):
        return api.create_response(
            request, {"detail": f"Authentication required: {auth_hint}"}, status=401
        )

    api.add_exception_handler(services.ServiceError, service_error)
    api.add_exception_handler(RequestDataTooBig, too_big)
    api.add_exception_handler(AuthenticationError, unauthenticated)
