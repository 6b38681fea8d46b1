"""Claims and "not now" in real Chromium: a claim shows up live on another reviewer's
page, whose decision then asks for a confirmation; "not now" empties my own inbox."""

from __future__ import annotations

import pytest

from hitl.core import decisions
from hitl.core.models import HumanInterrupt
from tests.conftest import wait_for
from tests.review import test_browser
from tests.review.conftest import human_interrupt, open_interrupts
from tests.review.test_browser_notify import shot

chromium = test_browser.chromium
browser_page = test_browser.browser_page

pytestmark = [pytest.mark.postgres, pytest.mark.browser]


def test_a_claim_is_seen_live_and_deciding_over_it_asks_first(
    asgi_server, browser_page, reviewer, second_reviewer, requester, settings
):
    settings.HITL_EXECUTOR = "manual"
    thread, (row,) = open_interrupts(user=requester, values=[human_interrupt("deploy")])
    rita = browser_page(asgi_server, "rita")
    sam = browser_page(asgi_server, "sam")
    for page in (rita, sam):
        page.goto(f"/threads/{thread.pk}/")
        page.wait_for_selector(f"#interrupt-{row.pk}")
        page.wait_for_selector("#live-indicator[data-state=live]")  # joined the thread's group

    rita.click("text=I'm on it")
    rita.wait_for_selector("[data-claim-chip]:has-text('You are on it')")
    rita.wait_for_selector("[data-claim=release]:visible")
    sam.wait_for_selector("[data-claim-chip]:has-text('rita is on it')", timeout=15_000)
    assert sam.locator("[data-claim=take]").is_hidden()
    shot(sam, "claim-seen-by-another-reviewer")

    dialogs: list[str] = []

    def dismiss(dialog):
        dialogs.append(dialog.message)
        dialog.dismiss()

    sam.once("dialog", dismiss)
    with sam.expect_event("dialog"):
        sam.click(f"#interrupt-{row.pk} button[data-action=accept]")
    assert dialogs == ["rita is on it. Decide anyway?"]
    assert HumanInterrupt.objects.get(pk=row.pk).status == "pending"

    sam.once("dialog", lambda dialog: dialog.accept())
    sam.click(f"#interrupt-{row.pk} button[data-action=accept]")
    wait_for(
        lambda: HumanInterrupt.objects.get(pk=row.pk).status == "resolved", 30, 0.1, "the decision"
    )
    row.refresh_from_db()
    assert (row.status, row.responded_by) == ("resolved", second_reviewer)
    assert rita.errors == [] and sam.errors == []


def test_not_now_hides_the_item_from_my_inbox(
    asgi_server, browser_page, reviewer, requester, settings
):
    settings.HITL_EXECUTOR = "manual"
    thread, (row,) = open_interrupts(user=requester, values=[human_interrupt("deploy")])
    rita = browser_page(asgi_server, "rita")
    assert rita.locator(f"#row-{row.pk}").count() == 1
    rita.goto(f"/threads/{thread.pk}/")
    rita.select_option(f"#interrupt-{row.pk} .snooze-form select", "4h")
    shot(rita, "claim-and-not-now-controls")
    rita.click(f"#interrupt-{row.pk} .snooze-form button")
    rita.wait_for_selector("text=Hidden from your pending list until")
    rita.goto("/")
    assert rita.locator(f"#row-{row.pk}").count() == 0
    rita.check("#id_snoozed")
    rita.wait_for_selector(f"#row-{row.pk}")
    shot(rita, "inbox-claim-and-snooze-filters")


def test_inbox_decisions_on_an_item_claimed_by_another_ask_first(
    asgi_server, browser_page, reviewer, second_reviewer, requester, settings
):
    from hitl.core.decisions import claims

    settings.HITL_EXECUTOR = "manual"
    _, (row,) = open_interrupts(user=requester, values=[human_interrupt("deploy")])
    claims.interrupt_claim(interrupt_id=row.pk, user=second_reviewer)
    rita = browser_page(asgi_server, "rita")
    rita.wait_for_selector(f"#row-{row.pk} .chip.claim:has-text('sam is on it')")
    dialogs: list[str] = []

    def dismiss(dialog):
        dialogs.append(dialog.message)
        dialog.dismiss()

    rita.on("dialog", dismiss)
    with rita.expect_event("dialog"):
        rita.keyboard.press("a")  # the quick key on the highlighted row
    rita.keyboard.press("x")
    with rita.expect_event("dialog"):
        rita.click("[data-bulk=accept]")
    assert dialogs == [
        "sam is on it. Decide anyway?",
        "1 of the selected items is claimed by someone else. Decide anyway?",
    ]
    assert HumanInterrupt.objects.get(pk=row.pk).status == "pending"
    shot(rita, "inbox-claimed-row")


def test_a_card_someone_else_answered_no_longer_needs_a_decision_nor_offers_claims(
    asgi_server, browser_page, reviewer, second_reviewer, requester, settings
):
    settings.HITL_EXECUTOR = "manual"
    thread, (first, second) = open_interrupts(
        user=requester,
        values=[human_interrupt("deploy"), human_interrupt("archive")],
        title="Ship it",
    )
    rita = browser_page(asgi_server, "rita")
    rita.goto(f"/threads/{thread.pk}/")
    rita.wait_for_selector("#live-indicator[data-state=live]")
    rita.fill(f"#interrupt-{first.pk} .respond textarea", "Wait for the freeze")
    assert rita.is_visible("#interrupts-title")

    # sam answers the first: rita's card says so, above the heading, with nothing to take.
    decisions.interrupt_resolve(interrupt_id=first.pk, user=second_reviewer, response_type="accept")
    lost = f"#interrupt-{first.pk}"
    rita.wait_for_selector(f"{lost} .form-error:has-text('Already answered by sam')")
    assert rita.text_content(f"{lost} .eyebrow") == "Answered by someone else"
    for what in (".claim-bar", "text=I'm on it", "text=Hide for me", "text=Not now"):
        assert rita.locator(f"{lost} >> {what}").count() == 0, what
    assert rita.locator(f"{lost} ~ #interrupts-title").count() == 1  # above the heading
    assert rita.locator(f"#interrupts-title ~ #interrupt-{second.pk}").count() == 1
    assert rita.is_visible("#interrupts-title")

    # sam answers the other too: no heading is left over the answered cards.
    decisions.interrupt_resolve(
        interrupt_id=second.pk, user=second_reviewer, response_type="accept"
    )
    rita.wait_for_selector(
        f"#interrupt-{second.pk} .form-error:has-text('Already answered by sam')"
    )
    rita.wait_for_selector("#interrupts-title", state="hidden")
    assert rita.is_visible(f"{lost} textarea.lost-typed")  # what she typed is kept to copy
    for width in (390, 1366):
        rita.set_viewport_size({"width": width, "height": 900})
        test_browser.shot(rita, f"answered-by-another-{width}")
    assert rita.errors == []
