"""What a service refuses with: each error carries the HTTP status the APIs answer with.

A leaf: it imports nothing of HITL, so every room can raise and catch these.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
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


# --- infrastructure faults ---------------------------------------------------------------


@functools.cache
def _transient_types() -> tuple[type[BaseException], ...]:
    import django.db
    import kombu.exceptions
    import psycopg
    import redis.exceptions

    return (
        django.db.OperationalError,  # connection lost, admin shutdown, deadlock, serialization
        django.db.InterfaceError,  # the connection was already closed
        psycopg.OperationalError,  # the same, raised by the checkpointer's own pool
        psycopg.InterfaceError,
        redis.exceptions.ConnectionError,
        redis.exceptions.TimeoutError,
        kombu.exceptions.OperationalError,  # the broker is unreachable
    )


def is_transient(exc: BaseException | None) -> bool:
    """True when `exc` (or what caused it) is a database, Redis or broker fault that a
    later attempt may not meet: the work is retried, never failed for it."""
    types = _transient_types()
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, types):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


class Unavailable(ServiceError):
    """The database, Redis or the broker is unreachable; the client should try again."""

    status_code = 503


# --- failures as people read them ---------------------------------------------------

_ROOT = str(Path(__file__).resolve().parents[2])
_PATH = re.compile(r"(/[^\s'\":]+)+/(site-packages|dist-packages)/")


def without_paths(text: str) -> str:
    """`text` with this server's directories taken out of file paths."""
    text = (text or "").replace(_ROOT + "/", "").replace(_ROOT, ".")
    return _PATH.sub("", text)


def error_headline(error: str) -> str:
    """The exception type and message of a stored traceback ("ValueError: bad input").

    The last exception of a chained traceback is the one that ended the run; a stored
    error that is not a traceback (a message of our own) is returned as it is.
    """
    lines = (error or "").strip().splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent")]
    if starts:
        tail = lines[starts[-1] + 1 :]
        # Frames, source lines and ^^^^ markers are indented; the exception line is not.
        body = [i for i, line in enumerate(tail) if line and not line[0].isspace()]
        lines = tail[body[0] :] if body else tail[-1:]
    # LangGraph adds a note naming its internal task; people need the exception alone.
    lines = [
        line for line in lines if line.strip() and not line.startswith("During task with name")
    ]
    text = "\n".join(lines).strip()
    return without_paths(text)[:2000] or "The run failed."


def error_line(error: str) -> str:
    """A stored failure as one line for API clients: the exception type and message."""
    return (error_headline(error).splitlines() or [""])[0][:1000]
