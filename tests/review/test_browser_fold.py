"""The demo's send_email card on a laptop screen, in real Chromium: its Accept button and
the recipient are in view at 1366x900, when the item arrives on a page that followed the
run and when a page opens on the item."""

from __future__ import annotations

import pytest

from hitl.core.models import HumanInterrupt, Thread
from tests.conftest import wait_for
from tests.review import test_browser as base
from tests.review.screens import shots

chromium = base.chromium
browser_page = base.browser_page

pytestmark = [pytest.mark.postgres, pytest.mark.browser]

IN_VIEW = """selector => {
  const el = document.querySelector(selector);
  if (!el) return false;
  const r = el.getBoundingClientRect();
  return r.top >= 0 && r.bottom <= window.innerHeight;
}"""


def in_view(page, selector: str) -> None:
    page.wait_for_function(IN_VIEW, arg=selector, timeout=10_000)


def test_the_send_email_cards_accept_is_in_view_at_1366_by_900(
    asgi_server, celery_worker, browser_page, reviewer
):
    page = browser_page(asgi_server, "rita")
    page.set_viewport_size({"width": 1366, "height": 900})
    page.goto("/threads/new/?graph=demo")
    page.wait_for_selector("#start-form-fields[data-graph=demo]")
    page.fill("#id_title", "Quarterly sales report")
    page.click("button.primary")
    page.wait_for_url("**/threads/*/")
    thread = Thread.objects.get(title="Quarterly sales report")
    # The Quick tour: answer the quarter here; the page follows the resumed run.
    page.locator("article.interrupt button.option:has-text('Q3 2025')").click()
    approval = wait_for(
        lambda: HumanInterrupt.objects.filter(thread=thread, action="send_email").first(),
        60,
        what="the send_email approval",
    )
    card = f"#interrupt-{approval.pk}"
    page.wait_for_selector(f"{card} button[data-action=accept]")
    in_view(page, f"{card} button[data-action=accept]")
    in_view(page, f"{card} input[data-key=to]")
    page.screenshot(path=f"{base.ARTIFACTS}/fold-followed-1366x900.png")

    # Opened on the item (the inbox, a mail, the "n" key), after its files load.
    page.goto("/")
    page.goto(f"/threads/{thread.pk}/#interrupt-{approval.pk}")
    page.wait_for_selector("figure.artifact-csv table.csv")
    in_view(page, f"{card} button[data-action=accept]")
    in_view(page, f"{card} input[data-key=to]")
    page.screenshot(path=f"{base.ARTIFACTS}/fold-opened-1366x900.png")
    shots(page, "send-email-card")
    assert page.errors == []
