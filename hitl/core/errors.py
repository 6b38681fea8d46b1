"""What a service refuses with: each error carries the HTTP status the APIs answer with.

A leaf: it imports nothing of HITL, so every room can raise and catch these.
"""

from __future__ import annotations

from typing import Any


class ServiceError(Exception):
    status_code = 400

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class Invalid(ServiceError):
    status_code = 400


class Forbidden(ServiceError):
    status_code = 403


class NotFound(ServiceError):
    status_code = 404


class Conflict(ServiceError):
    status_code = 409


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_has_nul(v) for v in value)
    return False


def check_storable(value: Any, what: str) -> Any:
    """Refuse JSON that PostgreSQL cannot store (NUL characters in strings or keys)."""
    if _has_nul(value):
        raise Invalid(f"{what} must not contain NUL (\\u0000) characters.")
    return value
