"""Django's middleware under ASGI without a thread hop per method (hitl/middleware.py).

The hop count is read in-process from asgiref; the behaviour that still needs the sync
thread (saving a session, CSRF's check of a POST) is checked through a real daphne.
"""

from __future__ import annotations

import asyncio
import re

import httpx
import pytest
from asgiref.sync import SyncToAsync
from asgiref.testing import ApplicationCommunicator
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler as DjangoASGIHandler
from django.test import override_settings

from hitl.middleware import INLINE, ASGIHandler

MIDDLEWARE_METHODS = ("process_request", "process_view", "process_response")


async def get(app, path: str) -> int:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"testserver")],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    communicator = ApplicationCommunicator(app, scope)
    await communicator.send_input({"type": "http.request", "body": b"", "more_body": False})
    start = await communicator.receive_output(10)
    await communicator.receive_output(10)
    await communicator.wait()
    return start["status"]


@pytest.fixture
def hops(monkeypatch) -> list[str]:
    seen: list[str] = []
    call = SyncToAsync.__call__

    def counting(self, *args, **kwargs):
        seen.append(getattr(self.func, "__name__", repr(self.func)))
        return call(self, *args, **kwargs)

    monkeypatch.setattr(SyncToAsync, "__call__", counting)
    return seen


def test_every_django_middleware_in_settings_has_an_inline_variant():
    django_mixins = [
        path
        for path in settings.MIDDLEWARE
        if path.startswith("django.") or path == "hitl.security.CSPMiddleware"
    ]
    assert django_mixins and all(path in INLINE for path in django_mixins)
    # Settings still name Django's classes: `check --deploy` finds them by name.
    assert "django.middleware.security.SecurityMiddleware" in settings.MIDDLEWARE


def test_an_api_request_makes_no_middleware_hop_to_the_sync_thread(hops):
    assert asyncio.run(get(DjangoASGIHandler(), "/langgraph/ok")) == 200
    stock = [name for name in hops if name in MIDDLEWARE_METHODS]
    # Django's own handler: each MiddlewareMixin method is a round trip to the thread.
    assert len(stock) >= 10, hops

    hops.clear()
    assert asyncio.run(get(ASGIHandler(), "/langgraph/ok")) == 200
    assert [name for name in hops if name in MIDDLEWARE_METHODS] == []


@pytest.mark.postgres
def test_login_csrf_and_the_session_still_work_through_daphne(asgi_server, reviewer):
    with httpx.Client(base_url=asgi_server, follow_redirects=False) as client:
        page = client.get("/login/")
        assert page.status_code == 200
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        form = {"username": "rita", "password": "pw-rita"}

        # CSRF's check of a POST still runs: no token, no login.
        refused = client.post("/login/", data=form)
        assert refused.status_code == 403
        assert "sessionid" not in client.cookies

        accepted = client.post("/login/", data={**form, "csrfmiddlewaretoken": token})
        assert accepted.status_code == 302, accepted.text[:300]
        assert client.cookies.get("sessionid")  # the session was saved (its hop kept)

        inbox = client.get("/")
        assert inbox.status_code == 200
        assert "rita" in inbox.text
        assert inbox.headers["x-frame-options"] == "DENY"
        assert "content-security-policy" in inbox.headers


def test_requests_reuse_their_sync_thread_instead_of_starting_one_each():
    import threading

    from django.http import HttpResponse
    from django.urls import path

    from hitl import middleware

    seen: set[str] = set()

    def view(request):
        seen.add(threading.current_thread().name)
        return HttpResponse("ok")

    async def five(app):
        for _ in range(5):
            assert await get(app, "/thread-probe/") == 200

    urlconf = type("urls", (), {"urlpatterns": [path("thread-probe/", view)]})
    with override_settings(ROOT_URLCONF=urlconf):
        middleware._IDLE.clear()
        asyncio.run(five(ASGIHandler()))
        assert len(seen) == 1 and seen.pop().startswith("hitl-request")
        # Django's handler starts (and joins) a new thread for every request.
        asyncio.run(five(DjangoASGIHandler()))
        assert len(seen) == 5


@pytest.fixture
def request_signal_receivers():
    """The request signals with Django's own receivers on `request_started` (as
    `django.db` connects them, before any handler of ours was made), left afterwards as
    they were before."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections, reset_queries

    ours = (close_old_connections, reset_queries)
    were = {receiver: receiver in _receivers(request_started) for receiver in ours}
    for receiver in ours:
        request_started.connect(receiver)
    yield request_started, request_finished
    for receiver, was in were.items():
        if not was:
            request_started.disconnect(receiver)


def _receivers(signal) -> list:
    sync, async_ = signal._live_receivers(None)
    return [*sync, *async_]


def test_the_web_handler_starts_a_request_without_database_receivers(request_signal_receivers):
    from django.db import close_old_connections, reset_queries

    started, finished = request_signal_receivers
    assert {close_old_connections, reset_queries} <= set(_receivers(started))
    ASGIHandler()
    assert close_old_connections not in _receivers(started)
    assert reset_queries not in _receivers(started)
    # The end of a request still checks (with the pool: hands back) its connection.
    assert close_old_connections in _receivers(finished)


def test_under_debug_the_query_log_is_still_emptied_per_request(request_signal_receivers):
    from django.db import reset_queries

    started, _ = request_signal_receivers
    with override_settings(DEBUG=True):
        ASGIHandler()
    assert reset_queries in _receivers(started)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_request_hands_its_database_connection_back_when_it_ends(request_signal_receivers):
    from django.contrib.auth import get_user_model
    from django.db import DEFAULT_DB_ALIAS, connections
    from django.http import HttpResponse
    from django.urls import path

    wrappers = []

    def view(request):
        get_user_model().objects.count()
        wrapper = connections[DEFAULT_DB_ALIAS]  # this thread's own, open now
        assert wrapper.connection is not None
        wrappers.append(wrapper)
        return HttpResponse("ok")

    urlconf = type("urls", (), {"urlpatterns": [path("db-probe/", view)]})
    with override_settings(ROOT_URLCONF=urlconf):
        app = ASGIHandler()

        async def twice():
            for _ in range(2):
                assert await get(app, "/db-probe/") == 200

        asyncio.run(twice())
    assert len(wrappers) == 2
    # Closed on the request's thread when its response was closed: back in the pool.
    assert all(wrapper.connection is None for wrapper in wrappers)
