"""Every form of the web app is CSRF-protected (and works with the page's token)."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from hitl.core.models import Thread
from tests.review.conftest import human_interrupt

pytestmark = pytest.mark.django_db


def token_from(client: Client, url: str) -> str:
    html = client.get(url).content.decode()
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)[1]


def strict_client(user=None) -> Client:
    client = Client(enforce_csrf_checks=True)
    if user is not None:
        client.force_login(user)
    return client


def test_login_needs_the_token(reviewer):
    client = strict_client()
    credentials = {"username": "rita", "password": "pw-rita"}
    assert client.post("/login/", credentials).status_code == 403
    token = token_from(client, "/login/")
    response = client.post("/login/", {**credentials, "csrfmiddlewaretoken": token})
    assert response.status_code == 302 and response["Location"] == "/"


def test_logout_needs_the_token(reviewer):
    client = strict_client(reviewer)
    assert client.post("/logout/").status_code == 403
    token = token_from(client, "/")
    assert client.post("/logout/", {"csrfmiddlewaretoken": token}).status_code == 302
    assert client.get("/").status_code == 302  # logged out


def test_start_thread_needs_the_token(reviewer, settings):
    settings.HITL_EXECUTOR = "manual"
    client = strict_client(reviewer)
    data = {"graph": "approval", "title": "t", "input": "{}"}
    assert client.post("/threads/new/", data).status_code == 403
    assert not Thread.objects.exists()
    token = token_from(client, "/threads/new/")
    assert client.post("/threads/new/", {**data, "csrfmiddlewaretoken": token}).status_code == 302
    assert Thread.objects.count() == 1


def test_decide_needs_the_token(paused, reviewer, requester):
    thread, (row,) = paused(user=requester, values=[human_interrupt()])
    client = strict_client(reviewer)
    url = f"/interrupts/{row.pk}/decide/"
    assert client.post(url, {"type": "accept"}).status_code == 403
    row.refresh_from_db()
    assert row.status == "pending"
    token = token_from(client, f"/threads/{thread.pk}/")
    assert client.post(url, {"type": "accept", "csrfmiddlewaretoken": token}).status_code == 302
    row.refresh_from_db()
    assert row.status == "resolved"


def test_quick_decisions_from_the_inbox_need_the_token(paused, reviewer, requester):
    _, (row,) = paused(user=requester, values=[human_interrupt()])
    client = strict_client(reviewer)
    url = f"/interrupts/{row.pk}/decide/"
    assert client.post(url, {"type": "accept"}, HTTP_ACCEPT="application/json").status_code == 403
    token = token_from(client, "/")
    response = client.post(
        url, {"type": "accept"}, HTTP_ACCEPT="application/json", HTTP_X_CSRFTOKEN=token
    )
    assert response.status_code == 200 and response.json()["ok"] is True


def test_cancel_needs_the_token(paused, requester):
    thread, _ = paused(user=requester, values=[human_interrupt()])
    client = strict_client(requester)
    url = f"/threads/{thread.pk}/cancel/"
    assert client.post(url).status_code == 403
    thread.refresh_from_db()
    assert thread.status == "interrupted"
    token = token_from(client, f"/threads/{thread.pk}/")
    assert client.post(url, {"csrfmiddlewaretoken": token}).status_code == 302
    thread.refresh_from_db()
    assert thread.status == "idle"


def test_every_rendered_form_carries_a_token(paused, client_for, reviewer, requester):
    thread, _ = paused(user=requester, values=[human_interrupt()])
    client = client_for(requester)
    for url in ("/", "/threads/new/", f"/threads/{thread.pk}/"):
        html = client.get(url).content.decode()
        forms = re.findall(r"<form[^>]*method=\"post\"[^>]*>(.*?)</form>", html, re.S)
        assert forms, url
        for form in forms:
            assert re.search(r'name="csrfmiddlewaretoken" value="[^"]+"', form), (url, form[:200])
