"""Issue 28 in real Chromium: analytics that add up and fit a 360 px phone, and inbox
filters folded behind a button on phones."""

from __future__ import annotations

import pytest
from django.utils import timezone

from hitl.core import decisions
from hitl.core.models import DecisionRule, HumanInterrupt
from tests.review import test_browser as base
from tests.review.conftest import human_interrupt, open_interrupts
from tests.review.test_browser_responsive import page_at  # noqa: F401

chromium = base.chromium
pytestmark = [pytest.mark.postgres, pytest.mark.browser]


def wide(page) -> int:
    return page.evaluate("() => document.documentElement.scrollWidth")


def test_analytics_keeps_rule_decisions_apart_and_fits_a_small_phone(
    asgi_server,
    page_at,  # noqa: F811
    admin_user,
    requester,
    reviewer,
    settings,
):
    settings.HITL_EXECUTOR = "manual"
    DecisionRule.objects.create(
        name="internal-mail-with-a-long-name",
        outcome="accept",
        action="send_email",
        condition='args.to.endsWith("@ourcompany.com")',
        mode="dry_run",
    )
    _, (by_rita, by_rule) = open_interrupts(
        user=requester, values=[human_interrupt("send_email"), human_interrupt("send_email")]
    )
    decisions.interrupt_resolve(interrupt_id=by_rita.pk, user=reviewer, response_type="accept")
    HumanInterrupt.objects.filter(pk=by_rule.pk).update(
        status="resolved",
        response_type="accept",
        decided_by_rule="internal-mail-with-a-long-name",
        responded_at=timezone.now(),
    )
    page = page_at(asgi_server, admin_user.username, {"width": 360, "height": 740})
    page.goto("/analytics/")
    # A rule's accept is not a person's: the counts name it apart.
    page.click("text=The numbers as a table")
    counts = page.inner_text(".analytics details table tbody")
    assert "accept 1" in counts and "rule 1" in counts
    assert "rule" in page.text_content("#decisions-chart")
    # Nothing wider than the phone: no sideways scroll of the page.
    assert wide(page) <= 360
    # The charts are drawn for the phone's width: their words stay readable, not shrunk
    # to a third (the desk layout at 360 px drew 12 px text about 4 px high).
    assert not page.is_visible("#decisions-chart") and page.is_visible("#decisions-chart-phone")
    for chart in ("#decisions-chart-phone", "#latency-chart-phone"):
        heights = page.eval_on_selector_all(
            f"{chart} text", "els => els.map(e => e.getBoundingClientRect().height)"
        )
        assert heights and min(heights) >= 10, (chart, heights)
    desk = page_at(asgi_server, admin_user.username, {"width": 1366, "height": 900})
    desk.goto("/analytics/")
    assert desk.is_visible("#decisions-chart") and not desk.is_visible("#decisions-chart-phone")
    assert desk.errors == []
    assert page.errors == []


def test_phone_filters_fold_behind_a_button(
    asgi_server,
    page_at,  # noqa: F811
    reviewer,
    requester,
    settings,
):
    settings.HITL_EXECUTOR = "manual"
    open_interrupts(user=requester, values=[human_interrupt("send_email")])
    phone = page_at(asgi_server, "rita", {"width": 390, "height": 844})
    assert not phone.is_visible("#filters")
    # Measured once the socket's first resync has redrawn the rows (a row swapped out
    # mid-measure has no box).
    phone.wait_for_selector("#live-indicator[data-state=live]")
    first_row = phone.locator("tbody tr.row").first
    first_row.wait_for(state="visible")
    row_top = first_row.bounding_box()["y"]
    assert row_top < 844 / 2  # the first item shows in the top half of the first screen
    phone.click("#filters-toggle")
    assert phone.is_visible("#filters select[name=group]")
    assert phone.get_attribute("#filters-toggle", "aria-expanded") == "true"
    desk = page_at(asgi_server, "rita", {"width": 1366, "height": 900})
    assert desk.is_visible("#filters") and not desk.is_visible("#filters-toggle")
    assert phone.errors == [] and desk.errors == []
