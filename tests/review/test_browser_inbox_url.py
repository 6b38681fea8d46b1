"""Inbox filters live in the address, in real Chromium: a clean, shareable URL that
another reviewer opens to the same filtered list, and the way back to it from an item
(the "Inbox" links and `g i`)."""

from __future__ import annotations

import pytest

from tests.review import test_browser as base
from tests.review.conftest import human_interrupt, open_interrupts
from tests.review.screens import shots

chromium = base.chromium
browser_page = base.browser_page

pytestmark = [pytest.mark.postgres, pytest.mark.browser]


def test_a_filtered_inbox_is_a_clean_url_that_is_shared_and_kept(
    asgi_server, browser_page, settings, requester, reviewer, second_reviewer
):
    settings.HITL_EXECUTOR = "manual"
    thread, (wanted,) = open_interrupts(user=requester, values=[human_interrupt("deploy")])
    _, (other,) = open_interrupts(
        user=requester, values=[human_interrupt("notify")], graph="ticket_triage"
    )
    rita = browser_page(asgi_server, "rita")
    rita.select_option("#id_graph", "approval")
    rita.wait_for_url("**/?tab=pending&graph=approval")
    rita.select_option("#id_order", "oldest")
    rita.wait_for_url("**/?tab=pending&graph=approval&order=oldest")
    shared = rita.url
    assert rita.locator(f"#row-{wanted.pk}").count() == 1
    assert rita.locator(f"#row-{other.pk}").count() == 0
    shots(rita, "inbox-filtered")

    # Another reviewer opens the shared address: the same filters, the same rows.
    sam = browser_page(asgi_server, "sam")
    sam.goto(shared)
    assert sam.input_value("#id_graph") == "approval" and sam.input_value("#id_order") == "oldest"
    assert sam.locator(f"#row-{wanted.pk}").count() == 1
    assert sam.locator(f"#row-{other.pk}").count() == 0

    # From an item, "Inbox" and `g i` lead back to the filtered list.
    rita.goto(f"/threads/{thread.pk}/")
    rita.click(".crumbs a:has-text('Inbox')")
    rita.wait_for_url(shared)
    rita.goto(f"/threads/{thread.pk}/")
    rita.wait_for_selector("#live-indicator[data-state=live]")
    rita.keyboard.press("g")
    rita.keyboard.press("i")
    rita.wait_for_url(shared)
    # "Clear filters" is one click away.
    rita.click("a.clear-filters")
    rita.wait_for_url("**/?tab=pending")
    assert rita.locator(f"#row-{other.pk}").count() == 1
    assert rita.errors == [] and sam.errors == []
