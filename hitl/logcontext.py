"""Request, thread and run ids on every log line, carried from the HTTP request to the worker.

The ids live in contextvars. The web side sets them in a middleware (and services
bind the ids of the run they enqueue); a before_task_publish hook copies them into
the Celery message headers; the worker sets them again before each task runs.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from asgiref.sync import iscoroutinefunction
from django.urls import Resolver404, ResolverMatch, get_urlconf, resolve
from django.utils.decorators import sync_and_async_middleware

FIELDS = ("request_id", "thread_id", "run_id")
HEADER_PREFIX = "hitl_"
_vars = {name: contextvars.ContextVar(f"hitl_{name}", default="") for name in FIELDS}
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


def current() -> dict[str, str]:
    return {name: var.get() for name, var in _vars.items() if var.get()}


def bind(**ids: Any) -> None:
    """Set ids for the rest of this context (None leaves an id unchanged)."""
    for name, value in ids.items():
        if value is not None:
            _vars[name].set(str(value))


def clear() -> None:
    for var in _vars.values():
        var.set("")


@contextmanager
def bound(**ids: Any) -> Iterator[None]:
    """Set ids for the duration of a block."""
    tokens = [(_vars[name], _vars[name].set(str(v))) for name, v in ids.items() if v is not None]
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


class ContextFilter(logging.Filter):
    """Adds request_id, thread_id, run_id and a printable `context` to each record."""

    def filter(self, record: logging.LogRecord) -> bool:
        ids = current()
        for name in FIELDS:
            setattr(record, name, ids.get(name, ""))
        record.context = "".join(f" {k}={v}" for k, v in ids.items())
        return True


# URL paths that carry a credential: a one-click e-mail link, a remote deployment's webhook.
_SECRET_PATHS = re.compile(r"(/e/|/webhook/)[^/\s\"']+")


class SecretFilter(logging.Filter):
    """Masks the credential in URL paths a log line names (Django logs every 4xx's path)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = _SECRET_PATHS.sub(r"\1hidden", message)
        if masked != message:
            record.msg, record.args = masked, None
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line, for log shippers."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "process": record.process,
        }
        for name in FIELDS:
            value = getattr(record, name, "")
            if value:
                entry[name] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


# --- the web side ------------------------------------------------------------------------


def _resolved(request) -> ResolverMatch | None:
    """The request's URL resolved (None: no route), kept on the request for Django's
    handler: hitl.middleware.ASGIHandler takes it from `kept_match` instead of resolving
    the path a second time."""
    try:
        match = resolve(request.path_info, get_urlconf())
    except Resolver404:
        return None
    request._hitl_match = (request.path_info, getattr(request, "urlconf", None), match)
    return match


def kept_match(request) -> ResolverMatch | None:
    """The match `_resolved` kept, if the request still has the path and urlconf it was
    resolved with (a middleware in between may change either)."""
    kept = getattr(request, "_hitl_match", None)
    if kept is None or kept[0] != request.path_info or kept[1] != getattr(request, "urlconf", None):
        return None
    return kept[2]


def _ids_for_request(request) -> dict[str, str]:
    supplied = request.headers.get("X-Request-ID", "")
    ids = {"request_id": supplied if _REQUEST_ID.match(supplied) else uuid.uuid4().hex}
    match = _resolved(request)
    thread_id = match.kwargs.get("thread_id") if match is not None else None
    if thread_id:
        ids["thread_id"] = str(thread_id)
    return ids


@sync_and_async_middleware
def request_context_middleware(get_response):
    """Bind a request id (X-Request-ID or a new one) and the URL's thread id."""
    if iscoroutinefunction(get_response):

        async def middleware(request):
            ids = _ids_for_request(request)
            with bound(**ids):
                response = await get_response(request)
            response["X-Request-ID"] = ids["request_id"]
            return response

    else:

        def middleware(request):
            ids = _ids_for_request(request)
            with bound(**ids):
                response = get_response(request)
            response["X-Request-ID"] = ids["request_id"]
            return response

    return middleware


# --- the Celery side ----------------------------------------------------------------------


def _add_headers(headers: dict[str, Any] | None = None, body: Any = None, **kwargs: Any) -> None:
    if headers is None:
        return
    ids = current()
    if headers.get("task") == "hitl.tasks.run_execute" and not ids.get("run_id"):
        # protocol 2 body: (args, kwargs, embed); a run task's first arg is its id
        with contextlib.suppress(TypeError, IndexError, KeyError):
            ids["run_id"] = str(body[0][0])
    for name, value in ids.items():
        headers.setdefault(HEADER_PREFIX + name, value)


def _bind_from_task(task: Any = None, args: Any = None, **kwargs: Any) -> None:
    clear()
    request = getattr(task, "request", None)
    ids = {name: getattr(request, HEADER_PREFIX + name, None) for name in FIELDS}
    if getattr(task, "name", "") == "hitl.tasks.run_execute" and args:
        ids["run_id"] = args[0]
    bind(**ids)


def _clear_after_task(**kwargs: Any) -> None:
    clear()


def connect_celery_signals() -> None:
    from celery import signals

    signals.before_task_publish.connect(_add_headers, weak=False, dispatch_uid="hitl-log-pub")
    signals.task_prerun.connect(_bind_from_task, weak=False, dispatch_uid="hitl-log-pre")
    signals.task_postrun.connect(_clear_after_task, weak=False, dispatch_uid="hitl-log-post")
