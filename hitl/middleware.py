"""Django's own middleware, without a thread hop per method under ASGI.

Under an async handler, Django runs every `process_request` / `process_view` /
`process_response` of a `MiddlewareMixin` through `sync_to_async`: each is a round trip
to the one shared sync thread. The stack in settings has eight such classes, so a
request paid ~14 hops (half of a trivial request's CPU, measured in bench/README.md)
before its view ran. Most of these methods only read headers and set attributes; they
are called here directly on the event loop. The ones that can touch the database keep
their hop, but only when they will: the session when it was read or changed, stored
messages when there are any, CSRF's view check on an unsafe method to a view that is
not exempt (its failure page may read the user).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import ThreadSensitiveContext, iscoroutinefunction, sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler as DjangoASGIHandler
from django.core.signals import request_started
from django.db import close_old_connections, reset_queries
from django.utils.decorators import sync_and_async_middleware
from django.utils.module_loading import import_string

from hitl import logcontext

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


def _never(*_: Any) -> bool:
    return False


def _session_used(request, _response=None) -> bool:
    session = getattr(request, "session", None)
    return session is not None and (session.accessed or session.modified)


def _messages_used(request, _response=None) -> bool:
    storage = getattr(request, "_messages", None)
    return storage is not None and (storage.used or storage.added_new)


def _csrf_checked(request, view, *_: Any) -> bool:
    # An exempt view (every API route: token-authenticated, and its session fallback
    # checks CSRF itself) is waved through before anything is read.
    return request.method not in SAFE_METHODS and not getattr(view, "csrf_exempt", False)


def _inline(
    dotted: str,
    *,
    request_hops: Callable[..., bool] = _never,
    view_hops: Callable[..., bool] = _never,
    response_hops: Callable[..., bool] = _never,
):
    """A middleware factory for the `MiddlewareMixin` class at `dotted`.

    Each `*_hops(request, ...)` says when that method must still run on the sync thread.
    Under WSGI (sync `get_response`) the class is used unchanged.
    """
    cls = import_string(dotted)

    @sync_and_async_middleware
    def factory(get_response):
        mw = cls(get_response)
        if not iscoroutinefunction(get_response):
            return mw
        on_request = getattr(mw, "process_request", None)
        on_response = getattr(mw, "process_response", None)
        on_view = getattr(mw, "process_view", None)

        async def call(method, hops, *args):
            if hops(*args):
                return await sync_to_async(method, thread_sensitive=True)(*args)
            return method(*args)

        async def middleware(request):
            response = None
            if on_request is not None:
                response = await call(on_request, request_hops, request)
            response = response or await get_response(request)
            if on_response is not None:
                response = await call(on_response, response_hops, request, response)
            return response

        if on_view is not None:

            async def process_view(request, view, args, kwargs):
                return await call(on_view, view_hops, request, view, args, kwargs)

            # The handler collects `process_view` from the object it is given.
            middleware.process_view = process_view
        return middleware

    factory.__qualname__ = factory.__name__ = cls.__name__
    factory.original = dotted
    return factory


SecurityMiddleware = _inline("django.middleware.security.SecurityMiddleware")
CSPMiddleware = _inline("hitl.security.CSPMiddleware")
SessionMiddleware = _inline(
    "django.contrib.sessions.middleware.SessionMiddleware", response_hops=_session_used
)
CommonMiddleware = _inline("django.middleware.common.CommonMiddleware")
CsrfViewMiddleware = _inline("django.middleware.csrf.CsrfViewMiddleware", view_hops=_csrf_checked)
AuthenticationMiddleware = _inline("django.contrib.auth.middleware.AuthenticationMiddleware")
MessageMiddleware = _inline(
    "django.contrib.messages.middleware.MessageMiddleware", response_hops=_messages_used
)
XFrameOptionsMiddleware = _inline("django.middleware.clickjacking.XFrameOptionsMiddleware")

INLINE = {
    factory.original: f"{__name__}.{name}"
    for name, factory in list(globals().items())
    if hasattr(factory, "original")
}


# Request executors kept for reuse (touched only from the server's event loop).
MAX_IDLE_EXECUTORS = 64
_IDLE: list[ThreadPoolExecutor] = []


def _new_executor() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="hitl-request")


def no_request_started_hop() -> None:
    """Take Django's database receivers off `request_started`, so that starting a
    request costs no round trip to its sync thread.

    `asend` hops to the thread whenever the signal has a sync receiver, and these are
    its only ones. Neither has work left there: `request_finished`, sent when the
    response is closed on the same thread, already ran `close_old_connections` (with
    the pool the connection went back at that point; a kept SQLite connection was
    checked and marked for a health check on its next use), and `reset_queries` only
    empties a log that is kept under DEBUG, where it stays connected.
    """
    request_started.disconnect(close_old_connections)
    if not settings.DEBUG:
        request_started.disconnect(reset_queries)


class ASGIHandler(DjangoASGIHandler):
    """Django's ASGI handler, with the classes above called inline.

    `settings.MIDDLEWARE` keeps naming Django's own classes, so the system checks
    (`check --deploy` looks for them by name) and the WSGI path see the usual stack.
    """

    def __init__(self) -> None:
        no_request_started_hop()
        super().__init__()

    async def __call__(self, scope, receive, send) -> None:
        # Django enters a fresh ThreadSensitiveContext per request, which starts (and
        # joins) a new thread for the request's sync work. Here each request borrows an
        # idle single-thread executor instead and gives it back when it ends.
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        executor = _IDLE.pop() if _IDLE else _new_executor()
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.handle(scope, receive, send)
        finally:
            if len(_IDLE) < MAX_IDLE_EXECUTORS:
                _IDLE.append(executor)
            else:
                executor.shutdown(wait=False)

    def resolve_request(self, request):
        # The log context's middleware, first of all, resolved the path already.
        match = logcontext.kept_match(request)
        if match is None:
            return super().resolve_request(request)
        request.resolver_match = match
        return match

    def load_middleware(self, is_async: bool = False) -> None:
        configured = settings.MIDDLEWARE
        settings.MIDDLEWARE = [INLINE.get(path, path) for path in configured]
        try:
            super().load_middleware(is_async)
        finally:
            settings.MIDDLEWARE = configured
