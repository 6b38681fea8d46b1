"""Notification pages in real Chromium: preferences with inline errors, a deep link that
goes through the login to the item, an expired link. Screenshots in /tmp/w13-shots/."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.core import signing

from hitl.core.access.links import SALT, link_token
from hitl.core.models import NotificationPreference
from hitl.integrations.email.messages import render
from tests.review import test_browser
from tests.review.conftest import human_interrupt, open_interrupts

# The browser fixtures of the main browser tests.
chromium = test_browser.chromium
browser_page = test_browser.browser_page

pytestmark = [pytest.mark.postgres, pytest.mark.browser]

SHOTS = Path(os.environ.get("HITL_SHOTS", "/tmp/w13-shots"))


def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def test_preferences_show_errors_inline_then_save(asgi_server, browser_page, reviewer, settings):
    page = browser_page(asgi_server, "rita")
    page.click("text=Notify me")
    page.wait_for_selector("h1:has-text('Notifications')")
    page.fill("#id_digest_minutes", "15")
    page.fill("#id_quiet_start", "22:00")
    page.fill("#id_timezone", "Mars/Olympus")
    page.click("button[type=submit]")
    page.wait_for_selector(".error")
    assert "not a known time zone" in page.inner_text("main")
    assert "Quiet hours need both" in page.inner_text("main")
    shot(page, "notify-preferences-errors")
    assert not NotificationPreference.objects.exists()

    page.fill("#id_timezone", "Europe/Berlin")
    page.fill("#id_quiet_end", "07:00")
    page.click("button[type=submit]")
    page.wait_for_selector("text=Notification preferences saved.")
    shot(page, "notify-preferences-saved")
    pref = NotificationPreference.objects.get(user=reviewer)
    assert (pref.digest_minutes, pref.timezone, str(pref.quiet_end)) == (
        15,
        "Europe/Berlin",
        "07:00:00",
    )


@pytest.fixture
def sync_orm_beside_playwright(monkeypatch):
    # Playwright's sync API keeps an event loop on this thread; the ORM calls are still
    # plain synchronous calls. Requested first, so it is undone last.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def test_a_deep_link_goes_through_the_login_to_the_item(
    sync_orm_beside_playwright, asgi_server, chromium, reviewer, requester, settings
):
    settings.HITL_EXECUTOR = "manual"
    _, (row,) = open_interrupts(user=requester, values=[human_interrupt("deploy", {"env": "prod"})])
    context = chromium.new_context(base_url=asgi_server, viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.goto(f"/n/{link_token(row.pk)}/")
        page.wait_for_selector("#id_username")  # the link needs a login
        page.fill("#id_username", "rita")
        page.fill("#id_password", "pw-rita")
        page.click("button[type=submit]")
        page.wait_for_url(f"**/threads/{row.thread_id}/#interrupt-{row.pk}")
        page.wait_for_selector(f"#interrupt-{row.pk}")
        shot(page, "notify-deep-link-opened")

        # A genuine token signed long ago (a frozen clock): past HITL_NOTIFY_LINK_MAX_AGE.
        old = signing.TimestampSigner(salt=SALT)
        old.timestamp = lambda: signing.b62_encode(1)  # 1970
        expired = old.sign_object({"i": str(row.pk)})
        response = page.goto(f"/n/{expired}/")
        assert response.status == 410
        assert "This link has expired" in page.inner_text("main")
        shot(page, "notify-link-expired")

        # What the e-mail looks like (its HTML part, as rendered for this item).
        from hitl.core.models import Notification

        notification = Notification(channel="email", address="rita@example.com")
        _, _, payload = render(notification, [row])
        page.set_content(payload["html"])
        shot(page, "notify-email-html")
    finally:
        context.close()
