"""An e-mail link refused because someone else is on the item, in real Chromium: the
page says so in a reviewer's words, as an error, and offers "Decide anyway"."""

from __future__ import annotations

import pytest

from hitl.core.decisions import claims
from hitl.core.decisions.email_links import email_links_create
from hitl.core.models import HumanInterrupt
from tests.review import test_browser as base
from tests.review.conftest import human_interrupt, open_interrupts
from tests.review.screens import shots

chromium = base.chromium

pytestmark = [pytest.mark.postgres, pytest.mark.browser]


@pytest.fixture
def anonymous_page(chromium, monkeypatch):
    """A page with no session, as a mail client opens a link."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    contexts = []

    def make(base_url: str):
        context = chromium.new_context(base_url=base_url, viewport={"width": 1366, "height": 900})
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(base.TIMEOUT_MS)
        page.errors = []
        page.on("pageerror", lambda exc: page.errors.append(str(exc)))
        return page

    yield make
    for context in contexts:
        context.close()


def test_a_link_refused_over_a_claim_says_so_in_words_styled_as_an_error(
    asgi_server, anonymous_page, settings, requester, reviewer, second_reviewer
):
    settings.HITL_EXECUTOR = "manual"
    _, (row,) = open_interrupts(user=requester, values=[human_interrupt("deploy")])
    links = dict(email_links_create(row=row, user=second_reviewer))
    page = anonymous_page(asgi_server)
    page.goto(f"/e/{links['accept']}/")
    page.wait_for_selector("button:has-text('Confirm: Approve')")
    # rita claims it while sam reads his mail: his confirmation is refused.
    claims.interrupt_claim(interrupt_id=row.pk, user=reviewer)
    page.click("button:has-text('Confirm: Approve')")
    alert = page.wait_for_selector("[role=alert]")
    text = alert.inner_text()
    assert text.startswith("Not decided: rita is on it (until ")
    assert "tick “Decide anyway”" in text
    assert "override_claim" not in page.inner_text("main")
    styled = alert.evaluate(
        "el => [getComputedStyle(el).backgroundColor, getComputedStyle(el).borderTopStyle]"
    )
    assert styled[0] not in ("rgba(0, 0, 0, 0)", "transparent") and styled[1] == "solid"
    assert HumanInterrupt.objects.get(pk=row.pk).status == "pending"
    shots(page, "email-claim-refused")

    page.check("input[name=override_claim]")
    page.click("button:has-text('Confirm: Approve')")
    page.wait_for_selector("h1:has-text('Approved')")
    row.refresh_from_db()
    assert (row.status, row.responded_by) == ("resolved", second_reviewer)
    assert page.errors == []
