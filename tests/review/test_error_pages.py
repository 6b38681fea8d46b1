"""Branded error pages, stale forms and expired sessions: said in words, nothing changed."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied
from django.test import Client, RequestFactory
from django.views.defaults import permission_denied

from hitl.core.models import HumanInterrupt
from hitl.outage import handler500
from tests.review.conftest import human_interrupt

NAVIGATION = ('href="/"', "Go to the inbox")


def assert_branded(response, status: int, *words: str) -> str:
    html = response.content.decode()
    assert response.status_code == status
    assert "HITL" in html and "app.css" in html
    for text in (*NAVIGATION, *words):
        assert text in html, text
    return html


def test_an_unknown_thread_is_a_branded_404_with_a_way_back(client_for, reviewer):
    response = client_for(reviewer).get("/threads/00000000-0000-0000-0000-000000000000/")
    html = assert_branded(response, 404, "Nothing here", "Start a thread")
    assert "/threads/00000000-0000-0000-0000-000000000000/" in html


def test_an_unknown_page_is_a_branded_404_for_anonymous_visitors_too(db):
    response = Client().get("/no-such-page/")
    assert_branded(response, 404, "Nothing here", 'href="/login/"')


def test_the_403_page_is_branded():
    request = RequestFactory().get("/threads/")
    response = permission_denied(request, PermissionDenied())
    assert_branded(response, 403, "You may not do this")


def test_the_500_page_is_branded_and_renders_without_a_request_context():
    request = RequestFactory().get("/threads/")
    try:
        raise ValueError("boom")
    except ValueError:
        response = handler500(request)
    html = assert_branded(response, 500, "Something broke on our side")
    assert "boom" not in html


def test_api_500s_stay_json():
    request = RequestFactory().get("/api/v1/threads")
    try:
        raise ValueError("boom")
    except ValueError:
        response = handler500(request)
    assert response["Content-Type"] == "application/json"


def test_a_stale_csrf_token_renders_a_friendly_page_and_decides_nothing(paused, reviewer):
    thread, (row,) = paused(user=reviewer, values=[human_interrupt()])
    client = Client(enforce_csrf_checks=True)
    client.force_login(reviewer)
    page = f"http://testserver/threads/{thread.pk}/"
    response = client.post(f"/interrupts/{row.pk}/decide/", {"type": "accept"}, HTTP_REFERER=page)
    html = assert_branded(response, 403, "out of date", "Back to the page")
    assert f'href="/threads/{thread.pk}/"' in html
    assert "CSRF verification failed" not in html
    as_json = client.post(
        f"/interrupts/{row.pk}/decide/", {"type": "accept"}, HTTP_ACCEPT="application/json"
    )
    assert as_json.status_code == 403
    assert as_json.json()["reason"] == "csrf" and "reload" in as_json.json()["error"]
    assert HumanInterrupt.objects.get(pk=row.pk).status == "pending"


def test_an_expired_session_gets_401_json_from_the_inbox_quick_keys(paused, reviewer):
    thread, (row,) = paused(user=reviewer, values=[human_interrupt()])
    response = Client().post(
        f"/interrupts/{row.pk}/decide/",
        {"type": "accept"},
        HTTP_ACCEPT="application/json",
        HTTP_REFERER="http://testserver/?tab=pending",
    )
    assert response.status_code == 401
    body = response.json()
    assert body["reason"] == "session" and "expired" in body["error"]
    assert body["login"] == "/login/?next=%2F%3Ftab%3Dpending"
    assert (
        Client().get(f"/threads/{thread.pk}/live/", HTTP_ACCEPT="application/json").status_code
        == 401
    )
    assert HumanInterrupt.objects.get(pk=row.pk).status == "pending"


def test_a_form_posted_after_the_session_ended_logs_in_back_to_the_page(paused, reviewer):
    thread, (row,) = paused(user=reviewer, values=[human_interrupt()])
    client = Client(enforce_csrf_checks=True)
    page = f"/threads/{thread.pk}/"
    response = client.post(
        f"/interrupts/{row.pk}/decide/", {"type": "accept"}, HTTP_REFERER="http://testserver" + page
    )
    assert response.status_code == 302
    assert response["Location"] == f"/login/?next=%2Fthreads%2F{thread.pk}%2F"
    assert HumanInterrupt.objects.get(pk=row.pk).status == "pending"
    login = client.get(response["Location"])
    assert "Your session expired before that was sent" in login.content.decode()
    token = login.cookies["csrftoken"].value
    back = client.post(
        response["Location"],
        {"username": "rita", "password": "pw-rita", "next": page, "csrfmiddlewaretoken": token},
    )
    assert back.status_code == 302 and back["Location"] == page


@pytest.mark.parametrize("referer", ["https://evil.example/threads/", ""])
def test_a_foreign_or_missing_referer_logs_in_to_the_inbox(paused, reviewer, referer):
    _, (row,) = paused(user=reviewer, values=[human_interrupt()])
    extra = {"HTTP_REFERER": referer} if referer else {}
    response = Client().post(f"/interrupts/{row.pk}/decide/", {"type": "accept"}, **extra)
    assert response["Location"] == "/login/?next=%2F"
