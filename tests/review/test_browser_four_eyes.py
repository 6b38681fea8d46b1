"""Four-eyes in real Chromium: a 2-of-M item approved by two reviewers in two browsers."""

from __future__ import annotations

from pathlib import Path

import pytest

from hitl.core import decisions
from hitl.core.decisions import email_links
from hitl.core.models import Approval, HumanInterrupt, Run
from tests.conftest import wait_for
from tests.review import test_browser as base
from tests.review.conftest import human_interrupt, open_interrupts
from tests.review.test_browser import assert_not_reloaded, mark_no_reload

chromium = base.chromium
browser_page = base.browser_page

pytestmark = [pytest.mark.postgres, pytest.mark.browser]

SHOTS = Path("/tmp/w14-shots")


def shot(page, name: str) -> None:
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def test_two_reviewers_in_two_browsers_approve_a_two_of_m_item(
    asgi_server, browser_page, requester, reviewer, second_reviewer, settings
):
    settings.HITL_EXECUTOR = "manual"
    thread, [row] = open_interrupts(
        user=requester,
        values=[
            human_interrupt(
                "wire_transfer", {"iban": "DE89 3704", "amount": 12000}, approvals={"required": 2}
            )
        ],
        title="Pay the supplier",
    )
    rita = browser_page(asgi_server, "rita")
    sam = browser_page(asgi_server, "sam")  # another browser context: its own cookies
    sam.wait_for_selector("#live-indicator[data-state=live]")
    mark_no_reload(sam)
    chip = f"#row-{row.pk} [data-approvals-count]"
    assert sam.text_content(chip).strip() == "0 of 2 approvals"

    rita.goto(f"/threads/{thread.pk}/")
    rita.wait_for_selector("#live-indicator[data-state=live]")
    card = f"#interrupt-{row.pk}"
    assert "0 of 2 approvals" in rita.text_content(f"{card} .approvals")
    rita.click(f"{card} button.btn-accept")
    rita.wait_for_selector(f"{card} .approvals:has-text('1 of 2 approvals')")
    assert "approved by rita" in rita.text_content(f"{card} .approvals")
    assert "Approval recorded (1 of 2 approvals)" in rita.text_content("body")
    shot(rita, "four-eyes-thread-after-first")

    # Sam's inbox learns it live, without a reload; the item is still pending.
    sam.wait_for_selector(f"{chip}:has-text('1 of 2 approvals')")
    assert_not_reloaded(sam)
    shot(sam, "four-eyes-inbox-live")
    assert HumanInterrupt.objects.get(pk=row.pk).status == "pending"
    assert not Run.objects.filter(thread=thread, kind="resume").exists()

    # Rita cannot approve twice.
    assert rita.is_disabled(f"{card} button.btn-accept")
    assert "approved these args already" in rita.inner_text(f"{card} .approve-refusal")
    assert Approval.objects.filter(interrupt=row).count() == 1

    # Sam opens it and gives the second approval: it resolves, rita's card goes live.
    sam.goto(f"/threads/{thread.pk}/")
    sam.wait_for_selector("#live-indicator[data-state=live]")
    rita.goto(f"/threads/{thread.pk}/")
    rita.wait_for_selector("#live-indicator[data-state=live]")
    mark_no_reload(rita)
    sam.click(f"{card} button.btn-accept")
    wait_for(
        lambda: HumanInterrupt.objects.get(pk=row.pk).status == "resolved",
        what="the quorum to resolve the interrupt",
    )
    rita.wait_for_selector(f"{card} button.btn-accept", state="detached")
    rita.wait_for_selector(f"{card} :text('rita and sam approved it as proposed')")
    assert_not_reloaded(rita)
    shot(rita, "four-eyes-resolved")
    row.refresh_from_db()
    assert (row.response_type, row.responded_by.username) == ("accept", "sam")
    [resume] = Run.objects.filter(thread=thread, kind="resume")
    assert resume.input["resume"][row.interrupt_id] == {"type": "accept", "args": None}
    assert not rita.errors and not sam.errors


def test_a_mail_link_whose_approval_would_be_refused_offers_nothing_to_confirm(
    asgi_server, browser_page, requester, reviewer, settings
):
    settings.HITL_EXECUTOR = "manual"
    _, [row] = open_interrupts(
        user=requester,
        values=[human_interrupt("wire_transfer", {"amount": 12000}, approvals={"required": 2})],
        title="Pay the supplier",
    )
    links = dict(email_links.email_links_create(row=row, user=reviewer))
    decisions.interrupt_resolve(interrupt_id=row.pk, user=reviewer, response_type="accept")
    rita = browser_page(asgi_server, "rita")
    # Her mail's Approve link, after she approved in the browser: refused up front.
    rita.goto(f"/e/{links['accept']}/")
    assert "You have approved these args already" in rita.inner_text(".email-action")
    assert rita.locator("button:has-text('Confirm: Approve')").count() == 0
    for width in (390, 1366):
        rita.set_viewport_size({"width": width, "height": 800})
        base.shot(rita, f"four-eyes-mail-refused-{width}")
    # Ignore still is hers to confirm.
    rita.goto(f"/e/{links['ignore']}/")
    assert rita.locator("button:has-text('Confirm: Ignore')").count() == 1
    assert Approval.objects.filter(interrupt=row).count() == 1
    assert rita.errors == []
