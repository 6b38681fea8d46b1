"""Error pages, values as JSON, the live audit trail and expired sessions, in real
headless Chromium (daphne; nothing resumes: runs are not dispatched)."""

from __future__ import annotations

from urllib.parse import unquote

import pytest

from hitl.core.models import HumanInterrupt
from tests.conftest import wait_for
from tests.review import test_browser as base
from tests.review.conftest import human_interrupt, open_interrupts
from tests.review.test_browser import mark_no_reload, open_counting_resyncs

chromium = base.chromium
browser_page = base.browser_page

pytestmark = [pytest.mark.postgres, pytest.mark.browser]

TYPED_ARGS = {
    "to": "a@b.c",
    "count": 3,
    "ratio": 1.0,
    "flag": True,
    "meta": {"list": [1, "x"], "nested": {"k": None}},
    "note": None,
}


def test_an_unknown_thread_is_a_branded_page_with_a_way_back(asgi_server, browser_page, reviewer):
    page = browser_page(asgi_server, "rita")
    response = page.goto("/threads/00000000-0000-0000-0000-000000000000/")
    assert response.status == 404
    assert page.inner_text("h1") == "Nothing here"
    assert page.is_visible("header.top a.brand")
    page.click("text=Go to the inbox")
    page.wait_for_url(asgi_server + "/")
    assert page.errors == []


def test_values_show_as_json_an_unchanged_edit_sends_them_back_and_the_audit_is_live(
    asgi_server, browser_page, reviewer, settings
):
    settings.HITL_EXECUTOR = "manual"
    mismatched = human_interrupt("post_note", {"body": {"list": [1, 2]}})
    mismatched["args_schema"] = {
        "type": "object",
        "properties": {"body": {"type": "string"}},
        "required": ["body"],
    }
    thread, (typed, wrong) = open_interrupts(
        user=reviewer,
        values=[human_interrupt("send_email", TYPED_ARGS), mismatched],
        title="Typed values",
    )
    page = browser_page(asgi_server, "rita")
    watcher = browser_page(asgi_server, "rita")
    watcher.goto(f"/threads/{thread.pk}/")
    watcher.wait_for_selector("#live-indicator[data-state=live]")
    mark_no_reload(watcher)
    audit_rows = watcher.locator("#audit-trail tbody tr").count()

    page.goto(f"/threads/{thread.pk}/")
    body = page.locator(f"#interrupt-{wrong.pk} textarea[data-key=body]")
    assert body.input_value() == '{\n  "list": [\n    1,\n    2\n  ]\n}'
    assert "{'list'" not in page.content()
    assert "proposed an object where the tool expects a string" in page.inner_text(
        f"#interrupt-{wrong.pk}"
    )
    # Nested values are JSON too, never Python text.
    meta = page.locator(f"#interrupt-{typed.pk} textarea[data-key=meta]").input_value()
    assert '"nested"' in meta and "None" not in meta and "null" in meta

    # Unchanged, an edit sends back exactly what the agent proposed, types and all.
    page.click(f"#interrupt-{typed.pk} button.btn-edit")
    page.wait_for_selector(f"#interrupt-{typed.pk}", state="detached")
    typed.refresh_from_db()
    assert (typed.status, typed.response_type) == ("resolved", "edit")
    assert typed.response_args == {"action": "send_email", "args": TYPED_ARGS}
    assert "Edited and approved: send email" in page.inner_text(".flashes")

    # The other page's audit trail and decisions list follow without a reload.
    wait_for(
        lambda: watcher.locator("#audit-trail tbody tr").count() > audit_rows,
        what="the audit trail to grow live",
    )
    watcher.wait_for_selector("#section-runs .decisions li")
    base.assert_not_reloaded(watcher)

    # The mismatched value, unchanged: the schema refuses it at the field, and the
    # editor still holds the JSON (not a repr).
    page.click(f"#interrupt-{wrong.pk} button.btn-edit")
    error = page.wait_for_selector(f"#interrupt-{wrong.pk} .form-error")
    assert "schema" in error.inner_text()
    assert (
        page.locator(f"#interrupt-{wrong.pk} textarea[data-key=body]")
        .input_value()
        .startswith('{\n  "list"')
    )
    assert HumanInterrupt.objects.get(pk=wrong.pk).status == "pending"
    assert page.errors == [] and watcher.errors == []


def test_an_expired_session_keeps_the_typed_decision_and_returns_to_the_page(
    asgi_server, browser_page, reviewer, settings
):
    settings.HITL_EXECUTOR = "manual"
    thread, (row,) = open_interrupts(user=reviewer, values=[human_interrupt("send_email")])
    _, (quick,) = open_interrupts(user=reviewer, values=[human_interrupt("archive")])
    page = browser_page(asgi_server, "rita")

    # The inbox's quick keys say the session is gone, with a way to log in.
    page.wait_for_selector("#live-indicator[data-state=live]")
    page.context.clear_cookies(name="sessionid")
    assert page.get_attribute("tr.row.selected", "id") == f"row-{quick.pk}"
    page.keyboard.press("a")
    toast = page.wait_for_selector(".toast:has-text('session has expired')")
    assert toast.query_selector("a").get_attribute("href").startswith("/login/?next=")
    assert HumanInterrupt.objects.get(pk=quick.pk).status == "pending"

    # Log in again, type an edit on the thread page, lose the session, submit.
    page.goto(toast.query_selector("a").get_attribute("href"))
    page.fill("#id_username", "rita")
    page.fill("#id_password", "pw-rita")
    page.click("button[type=submit]")
    page.wait_for_url(asgi_server + "/")
    page.goto(f"/threads/{thread.pk}/")
    page.fill(f"#interrupt-{row.pk} input[data-key=to]", "cfo@example.com")
    page.context.clear_cookies(name="sessionid")
    page.click(f"#interrupt-{row.pk} button.btn-edit")
    page.wait_for_url("**/login/?next=*")
    assert "Your session expired before that was sent" in page.inner_text(".flashes")
    assert HumanInterrupt.objects.get(pk=row.pk).status == "pending"

    # Back on the page the form was on, with what was typed.
    page.fill("#id_username", "rita")
    page.fill("#id_password", "pw-rita")
    page.click("button[type=submit]")
    page.wait_for_url(f"**/threads/{thread.pk}/")
    assert page.input_value(f"#interrupt-{row.pk} input[data-key=to]") == "cfo@example.com"
    assert "Restored what you had typed" in page.inner_text(f"#interrupt-{row.pk}")
    page.click(f"#interrupt-{row.pk} button.btn-edit")
    page.wait_for_selector(f"#interrupt-{row.pk}", state="detached")
    row.refresh_from_db()
    assert row.response_type == "edit" and row.response_args["args"]["to"] == "cfo@example.com"

    # Reloading does not bring the sent draft back.
    page.goto(f"/threads/{thread.pk}/")
    assert (
        page.evaluate("Object.keys(sessionStorage).filter(k => k.startsWith('hitl:draft:'))") == []
    )
    assert page.errors == []


def test_a_stale_page_gets_a_friendly_csrf_page(asgi_server, browser_page, reviewer, settings):
    settings.HITL_EXECUTOR = "manual"
    thread, (row,) = open_interrupts(user=reviewer, values=[human_interrupt("send_email")])
    page = browser_page(asgi_server, "rita")
    # Its own read done first: a response with a form in it renews the cookie it was
    # sent with (Django's get_token), which would put the page's token back.
    open_counting_resyncs(page, f"/threads/{thread.pk}/")
    # Logged in again elsewhere: the cookie's token no longer matches the page's.
    page.context.add_cookies([{"name": "csrftoken", "value": "x" * 32, "url": asgi_server}])
    page.click(f"#interrupt-{row.pk} button.btn-accept")
    page.wait_for_selector("h1:has-text('out of date')")
    assert "CSRF verification failed" not in page.content()
    page.click("text=Back to the page")
    page.wait_for_url(f"**/threads/{thread.pk}/")
    assert HumanInterrupt.objects.get(pk=row.pk).status == "pending"
    page.click(f"#interrupt-{row.pk} button.btn-accept")
    page.wait_for_selector(f"#interrupt-{row.pk}", state="detached")
    assert HumanInterrupt.objects.get(pk=row.pk).status == "resolved"


def test_a_thread_page_whose_session_ended_says_so_when_it_refreshes(
    asgi_server, browser_page, reviewer, second_reviewer, settings
):
    from hitl.core import decisions

    settings.HITL_EXECUTOR = "manual"
    thread, (first, _) = open_interrupts(
        user=reviewer, values=[human_interrupt("send_email"), human_interrupt("archive")]
    )
    page = browser_page(asgi_server, "rita")
    page.goto(f"/threads/{thread.pk}/")
    page.wait_for_selector("#live-indicator[data-state=live]")
    # The socket stays open; the session behind the page's own fetches is gone.
    page.context.clear_cookies(name="sessionid")
    decisions.interrupt_resolve(interrupt_id=first.pk, user=second_reviewer, response_type="accept")
    # The live update makes the page fetch its sections again: refused, and said so.
    toast = page.wait_for_selector(".toast:has-text('session has expired')", timeout=20_000)
    href = toast.query_selector("a").get_attribute("href")
    assert unquote(href) == f"/login/?next=/threads/{thread.pk}/"
    assert page.locator(".toast:has-text('session has expired')").count() == 1
