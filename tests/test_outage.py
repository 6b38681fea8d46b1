"""Outage answers: a transient fault is a 503 with Retry-After, never a 500."""

import json

import django.db
import psycopg
from django.test import RequestFactory

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
