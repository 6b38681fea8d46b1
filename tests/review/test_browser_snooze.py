"""Snoozing ("not now") in real Chromium: the page moves off the card set aside, the card
says until when and offers to un-snooze, the inbox's snoozed rows say so too."""

from __future__ import annotations

import pytest
from django.utils.timezone import localtime

from hitl.core.decisions import claims
from hitl.core.models import AuditEvent, InterruptSnooze
from tests.review import test_browser as base
from tests.review.conftest import human_interrupt, open_interrupts
from tests.review.screens import shots
from tests.review.test_browser import assert_not_reloaded, mark_no_reload

chromium = base.chromium
browser_page = base.browser_page

pytestmark = [pytest.mark.postgres, pytest.mark.browser]


def snooze(page, row, choice: str = "1h") -> None:
    page.select_option(f"#interrupt-{row.pk} .snooze-form select", choice)
    page.click(f"#interrupt-{row.pk} .snooze-form button")


def test_snoozing_moves_on_and_the_card_says_until_when_and_offers_un_snooze(
    asgi_server, browser_page, settings, requester, reviewer, second_reviewer
):
    settings.HITL_EXECUTOR = "manual"
    thread, (first, second) = open_interrupts(
        user=requester, values=[human_interrupt("deploy"), human_interrupt("notify")]
    )
    page = browser_page(asgi_server, "rita")
    page.goto(f"/threads/{thread.pk}/#interrupt-{first.pk}")
    # The thread's other item is next ...
    snooze(page, first)
    page.wait_for_url(f"**/threads/{thread.pk}/#interrupt-{second.pk}")
    assert "Hidden from your pending list until" in page.inner_text(".flashes")
    # ... and with none left on the thread, the inbox.
    snooze(page, second, "4h")
    page.wait_for_url(asgi_server + "/")
    assert page.locator(f"#row-{first.pk}, #row-{second.pk}").count() == 0

    # Listed with "Show snoozed", each row says until when.
    page.check("#id_snoozed")
    chip = page.wait_for_selector(f"#row-{first.pk} .chip.snoozed")
    assert chip.inner_text().startswith("snoozed until ")
    shots(page, "snooze-inbox-show-snoozed")

    # The card says so, offers un-snooze instead of "Hide for me", and keeps saying it
    # when a live update (sam's claim) replaces the card.
    page.goto(f"/threads/{thread.pk}/")
    card = f"#interrupt-{first.pk}"
    page.wait_for_selector("#live-indicator[data-state=live]")
    assert page.inner_text(f"{card} .chip.snoozed").startswith("Snoozed until ")
    assert page.locator(f"{card} .snooze-form").is_hidden()
    claims.interrupt_claim(interrupt_id=first.pk, user=second_reviewer)
    page.wait_for_selector(f"{card} [data-claim-chip]:has-text('sam is on it')")
    assert page.locator(f"{card} .chip.snoozed").is_visible()
    shots(page, "snooze-card-snoozed")

    page.click(f"{card} button:has-text('Un-snooze')")
    page.wait_for_selector(".flashes:has-text('Back on your pending list.')")
    assert page.locator(f"{card} .chip.snoozed").is_hidden()
    assert page.locator(f"{card} .snooze-form").is_visible()
    assert list(
        InterruptSnooze.objects.filter(user=reviewer).values_list("interrupt_id", flat=True)
    ) == [second.pk]
    ended = AuditEvent.objects.filter(kind="interrupt.snoozed", interrupt_id=first.pk).last()
    assert "snooze ended early" in ended.data["note"]
    page.goto("/")
    page.wait_for_selector(f"#row-{first.pk}")
    assert page.errors == []


def test_an_open_inbox_shows_a_snooze_made_in_another_tab_as_a_reload_does(
    asgi_server, browser_page, settings, requester, reviewer, second_reviewer
):
    settings.HITL_EXECUTOR = "manual"
    thread, (first, second) = open_interrupts(
        user=requester, values=[human_interrupt("deploy"), human_interrupt("notify")]
    )
    shown = browser_page(asgi_server, "rita")  # the inbox with "Show snoozed"
    shown.goto("/?snoozed=1")
    plain = browser_page(asgi_server, "rita")  # the inbox as it opens
    tab = browser_page(asgi_server, "rita")  # the thread page, in a third tab
    for inbox in (shown, plain):
        inbox.wait_for_selector("#live-indicator[data-state=live]")
        inbox.wait_for_selector(f"#row-{first.pk}")
        mark_no_reload(inbox)
    assert plain.inner_text("#pending-badge") == "2"

    tab.goto(f"/threads/{thread.pk}/#interrupt-{first.pk}")
    snooze(tab, first)
    tab.wait_for_selector(".flashes:has-text('Hidden from your pending list until')")
    chip = shown.wait_for_selector(f"#row-{first.pk} .chip.snoozed")
    live_text = chip.inner_text()
    plain.wait_for_selector(f"#row-{first.pk}", state="detached")
    plain.wait_for_selector("#pending-badge:text-is('1')")
    assert_not_reloaded(shown)
    assert_not_reloaded(plain)
    assert shown.locator(f"#row-{second.pk} .chip.snoozed").count() == 0

    # Another reviewer's claim re-renders the row for everyone: the chip stays, and the
    # inbox that hides snoozed items does not get it back.
    claims.interrupt_claim(interrupt_id=first.pk, user=second_reviewer)
    shown.wait_for_selector(f"#row-{first.pk} [data-claimed-by=sam]")
    assert shown.inner_text(f"#row-{first.pk} .chip.snoozed") == live_text
    plain.wait_for_selector("#live-indicator[data-state=live]")
    assert plain.locator(f"#row-{first.pk}").count() == 0
    assert plain.inner_text("#pending-badge") == "1"
    assert_not_reloaded(shown)
    assert_not_reloaded(plain)

    # What a reload shows is what the live page showed.
    shown.reload()
    assert shown.inner_text(f"#row-{first.pk} .chip.snoozed") == live_text
    until = InterruptSnooze.objects.get(interrupt=first, user=reviewer).until
    assert live_text == f"snoozed until {localtime(until):%-d %b %H:%M}"
    mark_no_reload(shown)

    # Taken back in the thread tab: the chip goes, the row and the count come back.
    tab.click(f"#interrupt-{first.pk} button:has-text('Un-snooze')")
    shown.wait_for_selector(f"#row-{first.pk} .chip.snoozed", state="detached")
    plain.wait_for_selector(f"#row-{first.pk}")
    plain.wait_for_selector("#pending-badge:text-is('2')")
    assert_not_reloaded(shown)
    assert_not_reloaded(plain)
    assert shown.errors == [] and plain.errors == [] and tab.errors == []
