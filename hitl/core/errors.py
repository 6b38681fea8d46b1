"""What a service refuses with: each error carries the HTTP status the APIs answer with.

A leaf: it imports nothing of HITL, so every room can raise and catch these.
"""

from __future__ import annotations

import functools
import math
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


# --- bounded input ------------------------------------------------------------------------

# Every JSON value a client sends (API bodies, query strings, forms, socket messages) is
# decoded and checked here. Deeper values are refused: nothing legitimate nests this far,
# and a deep value would exhaust the recursion limit of whatever walks it later.
MAX_JSON_DEPTH = 64
# Integers beyond 64 bits do not survive every store (checkpoints are msgpack); Infinity
# and NaN are not JSON at all (PostgreSQL refuses them).
MAX_JSON_INT = 2**63 - 1


def _path(parts: list[Any]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _bad_text(text: str) -> str | None:
    if "\x00" in text:
        return "must not contain NUL (\\u0000) characters"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "must not contain lone UTF-16 surrogates (\\ud800-\\udfff)"
    return None


def check_json(value: Any, what: str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Refuse a value no database stores the same way, or nested deeper than `max_depth`.

    NUL characters and lone UTF-16 surrogates (in strings or keys), non-finite numbers
    and integers beyond 64 bits are refused on SQLite as on PostgreSQL. Iterative, so a deep value cannot exhaust the stack; the message
    names the offending field (`input.items[3].name`).
    """
    stack: list[tuple[Any, list[Any]]] = [(value, [what])]
    while stack:
        item, parts = stack.pop()
        if isinstance(item, str):
            problem = _bad_text(item)
            if problem:
                raise Invalid(f"{_path(parts)} {problem}.")
            continue
        if isinstance(item, float) and not math.isfinite(item):
            raise Invalid(f"{_path(parts)} must be a finite number.")
        if isinstance(item, int) and not -MAX_JSON_INT - 1 <= item <= MAX_JSON_INT:
            raise Invalid(f"{_path(parts)} is too large (integers must fit in 64 bits).")
        if not isinstance(item, (dict, list, tuple)):
            continue
        if len(parts) > max_depth:
            raise Invalid(
                f"{_path(parts[:2])} is nested too deeply (more than {max_depth} levels)."
            )
        if isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, str):
                    problem = _bad_text(key)
                    if problem:
                        raise Invalid(f"{_path(parts)}: a key {problem}.")
                stack.append((child, [*parts, key]))
        else:
            stack.extend((child, [*parts, i]) for i, child in enumerate(item))
    return value


def check_storable(value: Any, what: str) -> Any:
    """Refuse JSON that a database cannot store faithfully (see `check_json`)."""
    return check_json(value, what)


def load_json(raw: bytes | str, what: str = "body") -> Any:
    """Decode a client's JSON document, bounded and checked: a 400 naming the field."""
    import json

    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise Invalid(f"{what} is not valid UTF-8.") from None
    try:
        value = json.loads(raw)
    except RecursionError:
        raise Invalid(f"{what} is nested too deeply (more than {MAX_JSON_DEPTH} levels).") from None
    except ValueError as exc:
        raise Invalid(f"{what} is not valid JSON: {exc}") from None
    return check_json(value, what)


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


# --- form and multipart bodies ----------------------------------------------------------


def form_body_errors() -> tuple[type[Exception], ...]:
    """What Django raises when it cannot parse a form or multipart body."""
    from django.core.exceptions import TooManyFieldsSent, TooManyFilesSent
    from django.http.multipartparser import MultiPartParserError

    return (MultiPartParserError, TooManyFieldsSent, TooManyFilesSent)


def form_body_message(exc: Exception) -> str:
    """A parser error as a 400's detail: what is wrong with the body."""
    return f"The form body could not be parsed: {exc}"


def multipart_boundary_problem(content_type: str) -> str | None:
    """Why a multipart Content-Type cannot be parsed (no or a bad boundary), or None.

    The same test as Django's MultiPartParser, made before any view reads the body, so
    every route answers it alike, also those that never read their body.
    """
    from django.http.multipartparser import MultiPartParser
    from django.utils.http import parse_header_parameters

    if not content_type.isascii():
        return "The Content-Type of a multipart body must be ASCII."
    boundary = parse_header_parameters(content_type)[1].get("boundary")
    if not boundary:
        return "A multipart/form-data body needs a boundary in its Content-Type."
    if not MultiPartParser.boundary_re.fullmatch(boundary):
        return "The multipart boundary must be 1 to 200 printable ASCII characters."
    return None
