"""Outage answers: a transient fault is a 503 with Retry-After, never a 500."""

import json

import django.db
import psycopg
import pytest
from django.http import JsonResponse
from django.test import RequestFactory
from django.urls import path
from ninja import NinjaAPI

from hitl.api.errors import BoundedParser, install_error_handlers
from hitl.core.db.retry import connections_suspect, retry_transient
from hitl.core.errors import Unavailable
from hitl.outage import OutageMiddleware, handler500

middleware = OutageMiddleware(lambda request: None)


def dropped() -> Exception:
    try:
        raise psycopg.OperationalError("consuming input failed: server closed the connection")
    except psycopg.OperationalError as exc:
        try:
            raise django.db.OperationalError(str(exc)) from exc
        except django.db.OperationalError as wrapped:
            return wrapped


def test_api_clients_get_json_503_with_retry_after():
    request = RequestFactory().post("/langgraph/threads")
    response = middleware.process_exception(request, dropped())
    assert response.status_code == 503
    assert response["Retry-After"] == "2"
    assert response["Content-Type"] == "application/json"
    assert "try again" in json.loads(response.content)["detail"]


def test_pages_get_a_banner_that_reloads_itself():
    request = RequestFactory().get("/threads/new/")
    response = middleware.process_exception(request, dropped())
    assert response.status_code == 503
    body = response.content.decode()
    assert 'role="alert"' in body and "HITL is reconnecting" in body
    assert 'http-equiv="refresh"' in body


def test_other_errors_are_left_to_django():
    request = RequestFactory().get("/threads/new/")
    assert middleware.process_exception(request, ValueError("a bug")) is None


def test_a_fault_outside_views_is_a_503_too():
    request = RequestFactory().get("/api/v1/threads")
    try:
        raise dropped()
    except django.db.OperationalError:
        response = handler500(request)
    assert response.status_code == 503


# --- repeated in the server ---------------------------------------------------------------


def test_work_that_met_a_dropped_session_is_repeated_until_it_succeeds(settings):
    settings.HITL_DB_RETRY_SECONDS = 2.0
    calls = []

    @retry_transient
    def work():
        calls.append(1)
        if len(calls) < 4:
            raise dropped()
        return "done"

    assert work() == "done"
    assert len(calls) == 4
    assert connections_suspect()  # the pool checks what it hands out for a moment


def test_an_outage_longer_than_the_deadline_is_a_503(settings):
    settings.HITL_DB_RETRY_SECONDS = 0.1
    calls = []

    @retry_transient
    def work():
        calls.append(1)
        raise dropped()

    with pytest.raises(Unavailable):
        work()
    assert 2 <= len(calls) <= 4


def test_a_fault_met_while_committing_is_not_repeated(settings):
    """The commit may have gone through: repeating could do the work twice."""
    settings.HITL_DB_RETRY_SECONDS = 2.0
    namespace = {"dropped": dropped}
    # A frame as Django's own commit has it (django/db/backends/base/base.py `_commit`).
    source = "def _commit():\n    raise dropped()\n"
    exec(compile(source, "/x/django/db/backends/base/base.py", "exec"), namespace)
    calls = []

    @retry_transient
    def work():
        calls.append(1)
        namespace["_commit"]()

    with pytest.raises(Unavailable):
        work()
    assert calls == [1]


def test_other_errors_are_not_repeated(settings):
    calls = []

    @retry_transient
    def work():
        calls.append(1)
        raise ValueError("a bug")

    with pytest.raises(ValueError):
        work()
    assert calls == [1]


# --- a 503 a view answers itself ---------------------------------------------------------

outage_api = NinjaAPI(urls_namespace="outage-test", parser=BoundedParser())
install_error_handlers(outage_api, auth_hint="none")


@outage_api.get("/gone")
def gone(request):
    raise Unavailable("The database is unreachable; try again shortly.")


def page_gone(request):
    return JsonResponse({"error": "The database is unreachable."}, status=Unavailable.status_code)


urlpatterns = [path("api/outage-test/", outage_api.urls), path("page-gone/", page_gone)]


@pytest.mark.urls("tests.test_outage")
@pytest.mark.parametrize("url", ["/api/outage-test/gone", "/page-gone/"])
def test_a_503_a_view_answers_itself_says_when_to_try_again(client, url):
    """`Unavailable` out of a retried unit reaches the API's error handler, which answers
    it as JSON: the 503 still carries Retry-After, as clients that retry expect."""
    response = client.get(url)
    assert response.status_code == 503
    assert response["Retry-After"] == "2"
    assert "unreachable" in response.content.decode()
