"""Bulk decisions in real Chromium: x and clicks select, "all matching" reaches the second
page, per-item results show, and another reviewer's open inbox loses the rows live."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from hitl.core.decisions import bulk
from hitl.core.models import HumanInterrupt
from tests.review import test_browser
from tests.review.conftest import human_interrupt, open_interrupts
from tests.review.test_browser_notify import shot

chromium = test_browser.chromium
browser_page = test_browser.browser_page

pytestmark = [pytest.mark.postgres, pytest.mark.browser]


def test_bulk_accept_across_pages_with_results_and_live_removal(
    asgi_server, browser_page, reviewer, second_reviewer, requester, settings
):
    settings.HITL_EXECUTOR = "manual"
    _, (locked,) = open_interrupts(
        user=requester, values=[human_interrupt("wire_money", allow_accept=False)]
    )
    for n in range(30):
        open_interrupts(user=requester, values=[human_interrupt("send_email", {"n": n})])
    page = browser_page(asgi_server, "rita")
    other = browser_page(asgi_server, "sam")
    for tab in (page, other):
        tab.wait_for_selector("#live-indicator[data-state=live]")
    assert page.locator("tbody tr.row").count() == 25  # one page of 30 + 1

    page.keyboard.press("x")  # the highlighted (first) row
    page.wait_for_selector("#bulk-bar:not([hidden])")
    assert page.inner_text("#bulk-count") == "1 selected"
    page.locator("tbody tr.row").nth(1).locator("input.pick-box").check()
    assert page.inner_text("#bulk-count") == "2 selected"
    assert page.locator("tbody tr.row.picked").count() == 2
    shot(page, "bulk-selected")

    asked = []
    page.on("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
    page.click("#bulk-all")
    page.wait_for_selector("text=All 31 items matching this filter selected")
    page.click("[data-bulk=accept]")
    page.wait_for_selector("#bulk-result-panel")
    assert len(asked) == 1 and asked[0].startswith("Accept 31 items?")
    summary = page.inner_text("#bulk-result-panel header")
    assert "30 decided" in summary and "1 skipped" in summary
    skipped = page.locator("#bulk-result-panel li[data-outcome=skipped]")
    assert "Its config does not allow accept." in skipped.inner_text()
    shot(page, "bulk-results")

    # Sam's inbox, open all along, loses the decided rows live.
    # A locator wait: the page's CSP forbids the eval a string predicate would need.
    expect(other.locator("tbody tr.row")).to_have_count(0, timeout=30_000)
    assert HumanInterrupt.objects.filter(status="resolved").count() == 30
    assert HumanInterrupt.objects.get(pk=locked.pk).status == "pending"
    assert page.errors == [] and other.errors == []


def test_another_reviewers_bulk_decision_is_said_once_naming_the_threads(
    asgi_server, browser_page, reviewer, second_reviewer, requester, settings
):
    settings.HITL_EXECUTOR = "manual"
    ids = []
    for title, count in (("Q3 report", 2), ("Refund #12", 2), ("Onboard Ada", 1)):
        _, rows = open_interrupts(
            user=requester, values=[human_interrupt("send_email")] * count, title=title
        )
        ids += [row.pk for row in rows]
    rita = browser_page(asgi_server, "rita")
    rita.wait_for_selector("#live-indicator[data-state=live]")
    assert rita.locator("tbody tr.row").count() == 5

    bulk.interrupt_bulk_decide(user=second_reviewer, interrupt_ids=ids, response_type="accept")
    expect(rita.locator("tbody tr.row")).to_have_count(0, timeout=30_000)
    toast = rita.locator("#toasts .toast")
    expect(toast).to_have_count(1)
    text = toast.inner_text()
    assert text.startswith("sam answered 5 items on ")
    for named in ("“Q3 report” (2)", "“Refund #12” (2)", "“Onboard Ada”"):
        assert named in text
    assert "Answered by sam." not in rita.inner_text("body")
    for width in (390, 1366):
        rita.set_viewport_size({"width": width, "height": 800})
        test_browser.shot(rita, f"bulk-by-another-{width}")
    assert rita.errors == []
